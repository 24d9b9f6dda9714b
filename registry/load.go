package registry

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"go.yaml.in/yaml/v3"
)

const (
	// maxFileSize is the largest input Load reads.
	maxFileSize = 4 << 20
	// extraVisits is how many keys, values and list items Load may read
	// beyond one per byte of input: aliases and merge keys may make it read
	// a part of the file again, and this bounds how often.
	extraVisits = 10000
	// maxMergeDepth bounds merge keys (<<) inside merged mappings.
	maxMergeDepth = 32
)

// Load reads a YAML configuration. The resilience4j section of a Spring
// Boot application.yml loads as is: resilience4j.bulkhead (semaphore
// bulkheads) and resilience4j.thread-pool-bulkhead (pool bulkheads), each
// with configs.<name> and instances.<name> (or backends.<name>), nested
// under resilience4j:, written as the dotted top-level keys Spring files
// use (resilience4j.bulkhead:), or without the resilience4j prefix. Other
// sections are ignored. Keys may be written in camelCase, kebab-case or
// snake_case; YAML anchors, aliases and merge keys (<<) work.
//
// Inside the bulkhead sections an unknown key is an error (with the key it
// was probably meant to be), and so is an invalid value; Spring
// placeholders (${VAR:default}) are refused, not resolved. A file that
// configures no bulkhead is an error. The error joins one [*ConfigError]
// per problem (up to 20), each with the line, the path, the instance, the
// field and the value. What Load accepts but does not do as Spring would is
// in the result's Warnings. docs/configuration.md lists every key.
//
// Load reads at most 4 MiB, and its work is linear in the input: aliases
// and merge keys may make it read a part again, but it reads at most one
// key, value or list item per byte of input plus 10,000, and refuses a file
// that would expand further. A nil r is a bug in the caller: Load panics.
func Load(r io.Reader) (Config, error) {
	if r == nil {
		panic("registry: Load called with a nil io.Reader")
	}
	c, _, err := load(r, "")
	return c, err
}

// LoadFile reads the YAML configuration in the named file, as [Load] does.
func LoadFile(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	c, _, err := load(f, path)
	return c, err
}

type posKey struct {
	sec         section
	name, field string
}

type posVal struct {
	line      int
	path, key string
}

type loader struct {
	l      errList
	cfg    Config
	pos    map[posKey]posVal
	visits int    // keys, values and list items still allowed
	hint   string // a top-level key that looks like a misspelt resilience4j
}

// load is Load, also returning the work it did (see errList.work).
func load(r io.Reader, file string) (Config, int, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return Config{}, 0, fmt.Errorf("registry: reading %s: %w", cmp.Or(file, "configuration"), err)
	}
	if len(data) > maxFileSize {
		return Config{}, 0, &ConfigError{File: file, Msg: fmt.Sprintf("the configuration is larger than %d bytes", maxFileSize)}
	}
	ld := &loader{pos: map[posKey]posVal{}, visits: len(data) + extraVisits}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for !ld.l.full() {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return Config{}, ld.l.work, &ConfigError{File: file, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
		}
		if len(doc.Content) > 0 {
			ld.document(doc.Content[0])
		}
	}
	if len(ld.l.errs) == 0 && len(ld.cfg.SemaphoreConfigs)+len(ld.cfg.Semaphores)+len(ld.cfg.PoolConfigs)+len(ld.cfg.Pools) == 0 {
		msg := "the file configures no bulkhead: expected resilience4j.bulkhead or resilience4j.thread-pool-bulkhead with configs or instances"
		if ld.hint != "" {
			msg += fmt.Sprintf(" (is %q a misspelt resilience4j?)", ld.hint)
		}
		ld.l.add(0, "", "%s", msg)
	}
	ld.cfg.compile(&ld.l, ld)
	ld.cfg.Warnings = ld.l.warns
	for _, e := range ld.l.errs {
		e.(*ConfigError).File = file
	}
	if len(ld.l.errs) > 0 {
		return Config{}, ld.l.work, errors.Join(ld.l.errs...)
	}
	return ld.cfg, ld.l.work, nil
}

// locate implements locator with the positions recorded while loading.
func (ld *loader) locate(sec section, name, field string) (int, string, string) {
	if p, ok := ld.pos[posKey{sec, name, field}]; ok {
		return p.line, p.path, p.key
	}
	if block, _, ok := strings.Cut(field, "."); ok { // a key inside the adaptive block
		return ld.locate(sec, name, block)
	}
	p := ld.pos[posKey{sec, name, ""}] // every entry Load read has one
	if key := springKey(sec.kind, field); key != "" {
		return p.line, p.path + "." + key, key
	}
	return p.line, p.path, ""
}

// springKey is the Spring key of a Spec field, for messages.
func springKey(k bulkhead.Kind, field string) string {
	if key := fieldKeys[k][field]; key != "" {
		return key
	}
	return field
}

// normalize folds the spellings Spring's relaxed binding accepts
// (maxWaitDuration, max-wait-duration, max_wait_duration) into one.
func normalize(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c == '-' || c == '_':
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// visit spends one unit of the loader's budget, reporting false (once, with
// an error) when it is spent.
func (ld *loader) visit(line int, path string) bool {
	ld.l.work++
	ld.visits--
	if ld.visits == -1 {
		ld.l.add(line, path, "aliases and merge keys expand the file beyond what it may hold (one key, value or list item per byte plus %d)", extraVisits)
	}
	return ld.visits >= 0
}

func (ld *loader) deref(n *yaml.Node, path string) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		if !ld.visit(n.Line, path) {
			return nil
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

type pair struct {
	key    string
	k, v   *yaml.Node
	merged bool // brought in by a merge key (<<)
}

// pairs lists a mapping's keys and values: explicit ones, then those merge
// keys (<<) bring in that no earlier key gives. A key written twice is an
// error, and so is a non-mapping.
func (ld *loader) pairs(n *yaml.Node, path, what string) []pair {
	n = ld.deref(n, path)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		hint := ""
		if path == "" && n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "=") {
			hint = " (only YAML is read: write application.properties' keys as application.yml)"
		}
		ld.l.add(n.Line, path, "%s must be a mapping of keys to values, got %s%s", what, describe(n), hint)
		return nil
	}
	var out []pair
	seen := map[string]int{}
	ld.collect(n, path, what, &out, seen, false, 0)
	return out
}

func (ld *loader) collect(n *yaml.Node, path, what string, out *[]pair, seen map[string]int, merged bool, depth int) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !ld.visit(k.Line, path) {
			return
		}
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			ld.l.add(k.Line, path, "%s: keys must be plain strings", what)
			continue
		}
		if line, dup := seen[k.Value]; dup {
			if !merged {
				ld.l.add(k.Line, joinPath(path, k.Value), "%s: key %q is given twice (first at line %d)", what, k.Value, line)
			}
			continue
		}
		seen[k.Value] = k.Line
		*out = append(*out, pair{key: k.Value, k: k, v: v, merged: merged})
	}
	for _, m := range merges {
		if depth >= maxMergeDepth {
			ld.l.add(m.Line, path, "%s: merge keys (<<) nest more than %d deep", what, maxMergeDepth)
			ld.visits = -2 // stop reading: the error says why
			return
		}
		if m = ld.deref(m, path); m == nil {
			return
		}
		srcs := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			srcs = m.Content // a list of mappings
		}
		for _, src := range srcs {
			if src = ld.deref(src, path); src == nil {
				return
			}
			if src.Kind != yaml.MappingNode {
				ld.l.add(src.Line, path, "%s: a merge key (<<) must name a mapping or a list of mappings", what)
				return
			}
			ld.collect(src, path, what, out, seen, true, depth+1)
		}
	}
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "something else"
}

func (ld *loader) document(root *yaml.Node) {
	for _, p := range ld.pairs(root, "", "the top level of the file") {
		switch nk := normalize(p.key); {
		case nk == "resilience4j":
			for _, q := range ld.pairs(p.v, p.key, p.key) {
				ld.section(q, normalize(q.key), p.key+"."+q.key)
			}
		case strings.HasPrefix(nk, "resilience4j."):
			ld.section(p, strings.TrimPrefix(nk, "resilience4j."), p.key)
		case nk == "bulkhead" || nk == "threadpoolbulkhead":
			ld.section(p, nk, p.key)
		case distance(nk, "resilience4j") <= 3:
			ld.hint = p.key
		}
	}
}

// section reads a section under resilience4j, if it is a bulkhead one; one
// a letter or two from those is a typo that would lose the whole section.
func (ld *loader) section(p pair, nk, path string) {
	switch nk {
	case "bulkhead":
		semaphoreKind.readSection(ld, p.v, path)
	case "threadpoolbulkhead":
		poolKind.readSection(ld, p.v, path)
	default:
		switch {
		case strings.HasPrefix(nk, "bulkhead.") || strings.HasPrefix(nk, "threadpoolbulkhead."):
			ld.l.add(p.k.Line, path, "key %q: dotted keys are read down to the section only (resilience4j.bulkhead:); nest the rest", p.key)
		case distance(nk, "bulkhead") <= 2:
			ld.l.add(p.k.Line, path, "unknown section %q (did you mean \"bulkhead\"?); a bulkhead section spelt wrong would be ignored", p.key)
		case distance(nk, "threadpoolbulkhead") <= 3:
			ld.l.add(p.k.Line, path, "unknown section %q (did you mean \"thread-pool-bulkhead\"?); a bulkhead section spelt wrong would be ignored", p.key)
		}
	}
}

var sectionKeys = []string{"configs", "instances", "backends", "tags", "metrics"}

func (d *kindDesc[S, C]) readSection(ld *loader, n *yaml.Node, path string) {
	for _, p := range ld.pairs(n, path, path) {
		if ld.l.full() {
			return
		}
		switch nk := normalize(p.key); nk {
		case "configs":
			d.readEntries(ld, p.v, path+"."+p.key, true)
		case "instances", "backends":
			d.readEntries(ld, p.v, path+"."+p.key, false)
		case "tags", "metrics", "bulkheadaspectorder", "threadpoolbulkheadaspectorder":
			// Micrometer tags and switches, Spring AOP order: no effect here.
		default:
			ld.l.add(p.k.Line, path+"."+p.key, "unknown key %q%s in %s%s", p.key, origin(p), path, suggest(nk, sectionKeys))
		}
	}
}

func origin(p pair) string {
	if p.merged {
		return " (brought in by a merge key <<)"
	}
	return ""
}

// readEntries reads configs.<name> or instances.<name>.
func (d *kindDesc[S, C]) readEntries(ld *loader, n *yaml.Node, path string, shared bool) {
	sec := section{d.kind, shared}
	m := d.ptr(&ld.cfg, shared)
	for _, p := range ld.pairs(n, path, path) {
		if ld.l.full() {
			return
		}
		name, epath := p.key, path+"."+p.key
		if prev, dup := ld.pos[posKey{sec, name, ""}]; dup {
			ld.l.add(p.k.Line, epath, "%s %q is given twice (first at line %d)", sec, name, prev.line)
			continue
		}
		ld.pos[posKey{sec, name, ""}] = posVal{line: p.k.Line, path: epath}
		if *m == nil {
			*m = map[string]S{}
		}
		(*m)[name] = d.readSpec(ld, p.v, epath, sec, name)
	}
}

func (d *kindDesc[S, C]) readSpec(ld *loader, n *yaml.Node, epath string, sec section, name string) S {
	var s S
	what := fmt.Sprintf("%s %q", sec, name)
	ld.fields(n, epath, what, "", d.validKeys, d.index, func(i int, key string, v *yaml.Node, path string) {
		f := d.fields[i]
		if f.name == "" {
			return // accepted, no effect
		}
		ld.pos[posKey{sec, name, f.name}] = posVal{line: v.Line, path: path, key: key}
		val := &value{ld: ld, n: v, path: path, what: what, key: key, sec: sec, entry: name}
		if fv := reflect.ValueOf(&s).Elem().FieldByName(f.name); f.name == "BaseConfig" {
			fv.SetString(val.name())
		} else {
			val.into(fv, "")
		}
	})
	return s
}

// fields reads the mapping n (of an entry, or of its block when block is
// not ""), whose keys must be among keys (index maps each normalized key to
// its field), each once: fn gets a key's field, the key and its value.
func (ld *loader) fields(n *yaml.Node, path, what, block string, keys []string, index map[string]int, fn func(i int, key string, v *yaml.Node, path string)) {
	in, prefix, mwhat := "", "", what
	if block != "" {
		in, prefix, mwhat = " in "+block, block+".", what+": "+block
	}
	seen := map[int]int{}
	for _, p := range ld.pairs(n, path, mwhat) {
		if ld.l.full() {
			return
		}
		kpath, nk := path+"."+p.key, normalize(p.key)
		i, ok := index[nk]
		if !ok {
			ld.l.add(p.k.Line, kpath, "%s: unknown key %q%s%s%s", what, p.key, origin(p), in, suggest(nk, keys))
			continue
		}
		if line, dup := seen[i]; dup {
			if !p.merged {
				ld.l.add(p.k.Line, kpath, "%s: %s%s is given twice (first at line %d)", what, prefix, p.key, line)
			}
			continue
		}
		seen[i] = p.k.Line
		if v := ld.deref(p.v, kpath); v != nil {
			fn(i, p.key, v, kpath)
		}
	}
}

// value is a field's YAML value, read with errors that name it.
type value struct {
	ld              *loader
	n               *yaml.Node
	path, what, key string
	sec             section // the entry it belongs to
	entry           string
}

func (v *value) fail(format string, args ...any) {
	v.ld.l.add(v.n.Line, v.path, "%s: %s "+format, append([]any{v.what, v.key}, args...)...)
}

func (v *value) scalar(want string) (string, bool) {
	switch {
	case v.n.Kind != yaml.ScalarNode:
		v.fail("must be %s, got %s", want, describe(v.n))
	case isNull(v.n):
		v.fail("has no value; give %s or remove the key", want)
	case placeholder(v.n.Value):
		v.fail("is the Spring placeholder %q, which the loader does not resolve; write the value, or expand the file first (os.ExpandEnv)", v.n.Value)
	default:
		return strings.TrimSpace(v.n.Value), true
	}
	return "", false
}

// placeholder reports whether s holds a Spring property placeholder such
// as ${PAY_MAX:2}.
func placeholder(s string) bool {
	i := strings.Index(s, "${")
	return i >= 0 && strings.IndexByte(s[i:], '}') > 0
}

func (v *value) integer() *int {
	s, ok := v.scalar("an integer")
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 32)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			v.fail("is out of range, got %s", s)
		} else {
			v.fail("must be an integer, got %q", v.n.Value)
		}
		return nil
	}
	i := int(n)
	return &i
}

func (v *value) duration() *time.Duration {
	s, ok := v.scalar("a duration")
	if !ok {
		return nil
	}
	d, err := parseDuration(s)
	switch {
	case errors.Is(err, errRange):
		v.fail("is out of range, got %q (the largest duration is about 292 years)", v.n.Value)
	case err != nil:
		v.fail("must be a duration such as 500ms, 2s, PT2S or a number of milliseconds, got %q", v.n.Value)
	default:
		return &d
	}
	return nil
}

func (v *value) name() string {
	s, ok := v.scalar("a config name")
	if ok && s == "" {
		v.fail("must name a config, got %q", v.n.Value)
	}
	return s
}

// suggest returns ` (did you mean "x"?)` for the known key nearest to nk,
// or the list of known keys when none is near.
func suggest(nk string, keys []string) string {
	if best := closest(nk, keys, normalize); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return "; known keys: " + strings.Join(keys, ", ")
}

// closest returns the candidate c nearest to s (norm(c) within an edit
// distance of 3), or "" when none is near.
func closest(s string, cands []string, norm func(string) string) string {
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
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
