package future

// HookCount returns how many hooks wait on f. Tests only.
func HookCount[T any](f *Future[T]) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for h := f.head.Load(); h != nil; h = h.next {
		n++
	}
	return n
}
