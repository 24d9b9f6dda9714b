package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// loader binds properties onto a Config.
type loader struct {
	l      errList
	env    Env
	cfg    Config
	ids    keyIDs
	props  map[int]*prop   // the active properties by normalized key (ids), later over earlier
	done   map[int]result  // the properties resolved (expand), by normalized key
	open   map[int]int     // the properties being resolved: their place in expand's stack
	hint   string          // a top-level key that looks like a misspelt resilience4j
	typos  map[string]bool // misspelt sections reported
	budget int             // bytes placeholders may still produce
	sem    *binder
	pool   *binder
}

func newLoader(env Env) *loader {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	return &loader{env: env, ids: keyIDs{}, props: map[int]*prop{}, done: map[int]result{}, open: map[int]int{}, typos: map[string]bool{},
		budget: MaxFileSize,
		sem:    newBinder("semaphore", semaphoreKeys, func(k string, v *value) { new(SemaphoreSpec).bind(k, v) }),
		pool:   newBinder("pool", poolKeys, func(k string, v *value) { new(PoolSpec).bind(k, v) })}
}

// bindDoc classifies each bulkhead property of an active document as a field of an entry.
func (ld *loader) bindDoc(d *document) {
	ld.sem.seen, ld.sem.conts = map[tkey]int{}, map[tkey]string{}
	ld.pool.seen, ld.pool.conts = map[tkey]int{}, map[tkey]string{}
	for i := range d.props {
		p := &d.props[i]
		s := p.segs
		if n := normalize(s[0].name); n == "resilience4j" && len(s) > 1 {
			s = s[1:]
		} else if n != "bulkhead" && n != "threadpoolbulkhead" {
			if n != "resilience4j" && distance(n, "resilience4j") <= 3 {
				ld.hint = s[0].name
			}
			continue
		}
		at := len(p.segs) - len(s) // the section's segment
		switch n := normalize(s[0].name); {
		case n == "bulkhead":
			ld.sem.add(ld, p, at)
		case n == "threadpoolbulkhead":
			ld.pool.add(ld, p, at)
		case at == 0 || ld.typos[d.file+"\x00"+n]:
		case distance(n, "bulkhead") <= 2 || distance(n, "threadpoolbulkhead") <= 3:
			ld.typos[d.file+"\x00"+n] = true
			want := map[bool]string{true: "bulkhead", false: "thread-pool-bulkhead"}[distance(n, "bulkhead") <= 2]
			p.fail(ld, at, "unknown section %q (did you mean %q?); a bulkhead section spelt wrong would be ignored", s[0].name, want)
		}
	}
}

// binder binds the properties of one kind.
type binder struct {
	kind   string
	keys   []keyInfo
	probe  func(key string, v *value) // binds v onto a Spec thrown away, for its errors
	index  map[string]int             // normalized key or alias -> its keys index
	blocks map[string][]string        // normalized block ("" or "adaptive.vegas") -> its keys, as spelt
	depth  int                        // segments in the longest key
	win    map[tkey]*prop             // the property that sets each field, later over earlier
	order  []tkey
	seen   map[tkey]int    // this document's fields: their line
	conts  map[tkey]string // this document's entries: their container (instances or backends)
}

// tkey is a field of an entry ("": the entry itself), as keys spells it.
type tkey struct {
	shared    bool
	name, key string
}

func newBinder(kind string, keys []keyInfo, probe func(string, *value)) *binder {
	b := &binder{kind: kind, keys: keys, probe: probe, index: map[string]int{}, blocks: map[string][]string{}, win: map[tkey]*prop{}}
	for i, f := range keys {
		for _, a := range append([]string{f.name}, f.alias...) {
			b.index[normalize(a)] = i
		}
		segs := strings.Split(f.name, ".")
		b.depth = max(b.depth, len(segs))
		for j := range segs {
			blk := normalize(strings.Join(segs[:j], "."))
			if !slices.Contains(b.blocks[blk], segs[j]) {
				b.blocks[blk] = append(b.blocks[blk], segs[j])
			}
		}
	}
	return b
}

// add classifies p, whose segment at names the section.
func (b *binder) add(ld *loader, p *prop, at int) {
	segs := p.segs
	// mapping reports whether segs[n] is a mapping, with an error if not.
	mapping := func(n int, what string) bool {
		switch {
		case n+1 < len(segs) && segs[n+1].index:
			p.fail(ld, n, "%s must be a mapping of keys to values, got a list", what)
		case n+1 == len(segs) && p.kind == scalar:
			p.fail(ld, n, "%s must be a mapping of keys to values, got %q", what, p.value)
		case n+1 < len(segs):
			return true
		}
		return false
	}
	if !mapping(at, joinSegs(segs[:at+1])) {
		return
	}
	shared := false
	switch c := normalize(segs[at+1].name); c {
	case "configs":
		shared = true
	case "instances", "backends":
	case "tags", "metrics", "bulkheadaspectorder", "threadpoolbulkheadaspectorder":
		return // Micrometer tags and switches, Spring AOP order: no effect here
	default:
		p.fail(ld, at+1, "unknown key %q%s in %s%s", segs[at+1].name, origin(p), joinSegs(segs[:at+1]), suggest(c, []string{"configs", "instances", "backends", "tags", "metrics"}))
		return
	}
	if !mapping(at+1, joinSegs(segs[:at+2])) {
		return
	}
	name, rest := segs[at+2].name, segs[at+3:]
	what := fmt.Sprintf("%s %q", section(b.kind, shared), name)
	entry := tkey{shared, name, ""}
	if prev, ok := b.conts[entry]; ok && prev != normalize(segs[at+1].name) {
		p.fail(ld, at+2, "%s is given twice (first at line %d)", what, b.locate(shared, name, "").Line)
		return
	}
	b.conts[entry] = normalize(segs[at+1].name)
	if _, ok := b.win[entry]; !ok {
		b.set(entry, p) // the entry's first property: where it is
	}
	if !mapping(at+2, what) {
		return
	}
	d := min(len(rest), b.depth) // the longest key that rest begins with
	i, known := b.index[normSegs(rest[:d])]
	for ; !known && d > 1; i, known = b.index[normSegs(rest[:d])] {
		d--
	}
	f := b.keys[i]
	_, block := b.blocks[normalize(f.name)]
	if !known || (d < len(rest) && block && f.goName != "-") {
		blk := 0 // the deepest block rest is in
		for j := min(len(rest)-1, b.depth); j > 0 && blk == 0; j-- {
			if _, ok := b.blocks[normSegs(rest[:j])]; ok {
				blk = j
			}
		}
		in := map[bool]string{true: " in " + joinSegs(rest[:blk])}[blk > 0]
		p.fail(ld, at+3+blk, "%s: unknown key %q%s%s%s", what, rest[blk].name, origin(p), in, suggest(normalize(rest[blk].name), b.blocks[normSegs(rest[:blk])]))
		return
	}
	t := tkey{shared, name, f.name}
	switch line, dup := b.seen[t]; {
	case f.goName == "-": // accepted, no effect
	case d < len(rest): // a value's key with keys below it
		q := *p
		q.kind = map[bool]uint8{true: emptyList, false: emptyMap}[rest[d].index]
		b.probe(f.name, &value{ld: ld, p: &q, what: what, key: joinSegs(rest[:d])})
	case dup && !p.merged:
		p.fail(ld, len(segs)-1, "%s: %s is given twice (first at line %d)", what, joinSegs(rest), line)
	case !dup:
		b.seen[t] = p.line()
		b.set(t, p)
	}
}

// locate tells where an entry's field was set: at the property that won
// it, or else in its block, or in the entry, from the entry's first property.
func (b *binder) locate(shared bool, name, key string) where {
	if p, ok := b.win[tkey{shared, name, key}]; ok && key != "" {
		w := p.where()
		w.key = joinSegs(p.segs[len(p.segs)-strings.Count(key, ".")-1:])
		return w
	}
	if block, _, ok := strings.Cut(key, "."); ok {
		return b.locate(shared, name, block)
	}
	var w where
	if p := b.win[tkey{shared, name, ""}]; p != nil { // the section, configs, the name
		w = p.at(map[bool]int{true: 3, false: 2}[normalize(p.segs[0].name) == "resilience4j"])
	}
	if key != "" {
		w.Path, w.key = w.Path+"."+key, key
	}
	return w
}

func (b *binder) set(t tkey, p *prop) {
	if _, ok := b.win[t]; !ok {
		b.order = append(b.order, t)
	}
	b.win[t] = p
}

func origin(p *prop) string {
	return map[bool]string{true: " (brought in by a merge key <<)"}[p.merged]
}

// bind sets every field from the property that won it, in the maps of
// configs and instances.
func bind[S any](ld *loader, b *binder, configs, instances *map[string]S, set func(*S, string, *value)) {
	for _, t := range b.order {
		m := map[bool]*map[string]S{true: configs, false: instances}[t.shared]
		if *m == nil {
			*m = map[string]S{}
		}
		s := (*m)[t.name]
		if t.key != "" {
			v := &value{ld: ld, p: b.win[t], what: fmt.Sprintf("%s %q", section(b.kind, t.shared), t.name), key: b.locate(t.shared, t.name, t.key).key}
			set(&s, t.key, v)
		}
		(*m)[t.name] = s
	}
}

// value is a property's value, read with errors that name it.
type value struct {
	ld        *loader
	p         *prop
	what, key string
}

func (v *value) fail(format string, args ...any) {
	v.ld.l.add(v.p.where(), "%s: %s "+format, append([]any{v.what, v.key}, args...)...)
}

// is reports whether the value is of kind, with an error naming want if not.
func (v *value) is(kind uint8, want string) bool {
	switch {
	case v.p.kind == kind:
		return true
	case v.p.kind == null:
		v.fail("has no value; give %s or remove the key", want)
	case v.p.kind == scalar:
		v.fail("must be %s, got %q", want, v.p.value)
	default:
		v.fail("must be %s, got %s", want, map[bool]string{true: "a mapping", false: "a list"}[v.p.kind == emptyMap])
	}
	return false
}

// scalar returns the value with its placeholders resolved.
func (v *value) scalar(want string) (string, bool) {
	if !v.is(scalar, want) {
		return "", false
	}
	v.ld.open[v.p.id()] = 0
	s, err := v.ld.expand(v.p.value, []string{joinSegs(v.p.segs)})
	delete(v.ld.open, v.p.id())
	if err != nil {
		v.fail("%s", err)
		return "", false
	}
	return strings.TrimSpace(s), true
}

// expand resolves ${NAME} and ${NAME:default} in s; stack holds the names
// being resolved, to find cycles.
func (ld *loader) expand(s string, stack []string) (string, error) {
	var out strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			out.WriteString(s)
			break
		}
		depth, j := 0, i+2
		for ; j < len(s) && (s[j] != '}' || depth > 0); j++ {
			if strings.HasPrefix(s[j:], "${") {
				if depth++; depth == maxNest { // each level's default is read again
					return "", fmt.Errorf("has placeholders nested more than %d deep", maxNest)
				}
			} else if s[j] == '}' {
				depth--
			}
		}
		if j == len(s) {
			return "", fmt.Errorf("has the placeholder %q with no closing }", s[i:])
		}
		out.WriteString(s[:i])
		name, def, hasDef := strings.Cut(s[i+2:j], ":")
		v, ok, err := ld.lookup(strings.TrimSpace(name), stack)
		switch {
		case err != nil:
			return "", err
		case !ok && hasDef:
			if v, err = ld.expand(def, stack); err != nil {
				return "", err
			}
		case !ok:
			return "", fmt.Errorf("has the placeholder ${%s}, which resolves to nothing: no environment variable or property %s is set (give a default: ${%s:value})", name, name, name)
		}
		out.WriteString(v)
		s = s[j+1:]
	}
	if ld.budget -= out.Len(); ld.budget < 0 {
		return "", fmt.Errorf("has placeholders that expand beyond %d bytes", MaxFileSize)
	}
	return out.String(), nil
}

type result struct {
	v   string
	err error
}

// lookup finds a placeholder's name as Spring does: in the environment (as
// written, or as NAME_WITH_UNDERSCORES), then in the properties, each
// resolved once.
func (ld *loader) lookup(name string, stack []string) (string, bool, error) {
	env := strings.NewReplacer(".", "_", "-", "").Replace(name)
	for _, n := range []string{name, env, strings.ToUpper(env)} {
		if v, ok := ld.env(n); ok {
			return v, true, nil
		}
	}
	segs := splitKey(name, 0, nil)
	if !ld.ids.number(segs, 0, false) || ld.props[segs[len(segs)-1].id] == nil {
		return "", false, nil
	}
	id := segs[len(segs)-1].id
	if i, open := ld.open[id]; open {
		return "", false, fmt.Errorf("has the placeholder ${%s}, which makes a cycle: %s -> %s", name, strings.Join(stack[i:], " -> "), name)
	}
	r, ok := ld.done[id]
	if !ok {
		ld.open[id] = len(stack)
		r.v, r.err = ld.expand(ld.props[id].value, append(stack, name))
		delete(ld.open, id)
		ld.done[id] = r
	}
	return r.v, true, r.err
}

// read returns v read by parse, or nil (and an error on v naming mustBe,
// or the range) if parse fails. The error quotes a value made by
// placeholders as written: it may come from the environment.
func read[T any](v *value, want, mustBe string, parse func(s string) (T, error)) *T {
	s, ok := v.scalar(want)
	if !ok {
		return nil
	}
	got := func(verb string) string {
		if strings.Contains(v.p.value, "${") {
			return "the value of " + strconv.Quote(v.p.value)
		}
		return fmt.Sprintf(verb, s)
	}
	switch x, err := parse(s); {
	case err == nil:
		return &x
	case errors.Is(err, strconv.ErrRange):
		v.fail("is out of range, got %s", got("%s"))
	case errors.Is(err, errRange):
		v.fail("is out of range, got %s (the largest duration is about 292 years)", got("%q"))
	default:
		v.fail("must be %s, got %s", mustBe, got("%q"))
	}
	return nil
}

func (v *value) int() *int {
	return read(v, "an integer", "an integer", func(s string) (int, error) {
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 32)
		return int(n), err
	})
}

func (v *value) duration() *time.Duration {
	return read(v, "a duration", "a duration such as 500ms, 2s, PT2S or a number of milliseconds", parseDuration)
}

func (v *value) number() *float64 {
	return read(v, "a number", "a finite number", func(s string) (float64, error) {
		f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, strconv.ErrSyntax // not a finite number
		}
		return f, nil
	})
}

func (v *value) str() *string {
	return read(v, "a string", "", func(s string) (string, error) { return s, nil })
}

func (v *value) boolean() *bool {
	return read(v, "true or false", "true or false", func(s string) (bool, error) {
		if len(s) < 4 { // not 1, 0, t or f
			return false, strconv.ErrSyntax
		}
		return strconv.ParseBool(strings.ToLower(s))
	})
}

// queueOrder reads fifo, lifo or adaptiveLifo, in any case.
func (v *value) queueOrder() *bulkhead.QueueOrder {
	return read(v, "fifo, lifo or adaptiveLifo", "fifo, lifo or adaptiveLifo", func(s string) (bulkhead.QueueOrder, error) {
		for o := bulkhead.FIFO; o <= bulkhead.AdaptiveLIFO; o++ {
			if strings.EqualFold(strings.ReplaceAll(s, "-", ""), o.String()) {
				return o, nil
			}
		}
		return 0, strconv.ErrSyntax
	})
}

// name reads a baseConfig.
func (v *value) name() string {
	x, ok := v.scalar("a config name")
	if ok && x == "" {
		v.fail("must name a config, got %q", v.p.value)
	}
	return x
}

// suggest returns ` (did you mean "x"?)` for the known key nearest to nk,
// or the list of known keys when none is near.
func suggest(nk string, keys []string) string {
	if best := Closest(nk, keys, normalize); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return "; known keys: " + strings.Join(keys, ", ")
}

// Closest returns the candidate c nearest to s (norm(c) within an edit
// distance of 3), or "" when none is near.
func Closest(s string, cands []string, norm func(string) string) string {
	best, bestD := "", 4
	for _, c := range cands {
		if d := distance(s, norm(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, capped for long input.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cur[j] = min(prev[j-1]+min(1, int(a[i-1]^b[j-1])), prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
