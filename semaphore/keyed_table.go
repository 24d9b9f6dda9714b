package semaphore

import "sync/atomic"

// ktable is a Keyed bulkhead's table of entries: open addressing with
// linear probing, read without a lock, changed only under Keyed.mu. A
// reader finds an entry by its key's hash alone and checks the key only
// after it took a permit of the entry (see Keyed.tryFast), so that an
// entry may be recycled for another key while a reader still holds it: its
// key is written only while nothing holds it. A change of size builds a new
// table and publishes it; a reader of the old one finds an entry dead or
// missing and takes the locked path.
type ktable[K comparable] struct {
	slots []atomic.Pointer[entry[K]]
	mask  uint64
	tomb  *entry[K] // marks a removed entry's slot; probing goes on past it
	live  int       // entries in the table; Keyed.mu
	used  int       // slots not nil (entries and tombs); Keyed.mu
}

func newTable[K comparable](size int, tomb *entry[K]) *ktable[K] {
	return &ktable[K]{slots: make([]atomic.Pointer[entry[K]], size), mask: uint64(size - 1), tomb: tomb}
}

// find returns the first entry whose key hashes to h, or nil. Its key is
// not checked: the caller does so once it holds a permit of the entry.
func (t *ktable[K]) find(h uint64) *entry[K] {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		e := t.slots[i].Load()
		if e == nil {
			return nil
		}
		if e != t.tomb && e.hash.Load() == h {
			return e
		}
	}
}

// lookup returns key's entry, or nil. Keyed.mu must be held.
func (t *ktable[K]) lookup(h uint64, key K) *entry[K] {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		e := t.slots[i].Load()
		if e == nil {
			return nil
		}
		if e != t.tomb && e.hash.Load() == h && e.key == key {
			return e
		}
	}
}

// put adds e, whose key is not in t, in the first free slot of its probe.
// Keyed.mu must be held, and t must have a nil slot.
func (t *ktable[K]) put(e *entry[K]) {
	h := e.hash.Load()
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		switch s := t.slots[i].Load(); s {
		case nil:
			t.used++
			fallthrough
		case t.tomb:
			t.slots[i].Store(e)
			t.live++
			return
		}
	}
}

// remove takes e out of t. Keyed.mu must be held.
func (t *ktable[K]) remove(e *entry[K]) {
	for i := e.hash.Load() & t.mask; ; i = (i + 1) & t.mask {
		if t.slots[i].Load() == e {
			t.slots[i].Store(t.tomb)
			t.live--
			return
		}
	}
}

// resized returns t, or a new table holding t's entries if t is too full
// for one more or far larger than its entries need (after a flood of
// keys). Keyed.mu must be held.
func (t *ktable[K]) resized() *ktable[K] {
	n := len(t.slots)
	switch {
	case (t.used+1)*4 > n*3: // a quarter free, at least
		for n*3 < (t.live+1)*8 { // grown (or cleared of tombs) to at most 3/8 full
			n *= 2
		}
	case n > minTable && t.live*8 < n:
		for n > minTable && t.live*4 < n {
			n /= 2
		}
	default:
		return t
	}
	nt := newTable(n, t.tomb)
	for i := range t.slots {
		if e := t.slots[i].Load(); e != nil && e != t.tomb {
			nt.put(e)
		}
	}
	return nt
}

// minTable is the smallest table's size, a power of 2.
const minTable = 16
