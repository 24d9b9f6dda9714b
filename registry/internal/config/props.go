package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

const (
	// MaxFileSize is the largest file the loader reads.
	MaxFileSize = 4 << 20
	// extraVisits is how many keys, values and list items a file may hold
	// beyond one per byte: aliases and merge keys may make the loader read
	// a part of the file again, and this bounds how often.
	extraVisits   = 10000
	maxMergeDepth = 32 // merge keys (<<) inside merged mappings
	// maxSegs is how many segments of its key a property keeps: a deeper
	// key keeps its first maxSegs-1 and "…", so that each property costs
	// the same however deep the file nests (its id names the whole key).
	maxSegs = 16
	maxNest = 32 // placeholders in placeholders' defaults
)

// seg is one segment of a flattened key, as written, with its key's line.
type seg struct {
	name  string
	line  int
	index bool // a list index: [0]
	id    int  // the number of the normalized key up to this segment (keyIDs)
}

// keyIDs numbers normalized keys, a segment at a time: a key's number is
// its last segment's under the number of the key before it (0 for none).
type keyIDs map[keyID]int

type keyID struct {
	up   int
	name string
}

// number numbers segs[from:] (those before are numbered), adding numbers
// if add; it reports false if a key is not numbered and add is false.
func (t keyIDs) number(segs []seg, from int, add bool) bool {
	for i := from; i < len(segs); i++ {
		k := keyID{0, normalize(segs[i].name)}
		if i > 0 {
			k.up = segs[i-1].id
		}
		id, ok := t[k]
		if !ok && !add {
			return false
		} else if !ok {
			id = len(t) + 1
			t[k] = id
		}
		segs[i].id = id
	}
	return true
}

// Value kinds.
const (
	scalar = iota
	null
	emptyMap
	emptyList
)

// prop is one property: a flattened key and its value.
type prop struct {
	segs   []seg
	value  string
	kind   uint8
	merged bool // brought in by a merge key (<<)
	doc    *document
}

func (p *prop) line() int { return p.segs[len(p.segs)-1].line }

func (p *prop) id() int { return p.segs[len(p.segs)-1].id }

// where is p's place, for errors.
func (p *prop) where() where {
	return where{Error: Error{File: p.doc.file, Line: p.line(), Path: joinSegs(p.segs), Profile: p.doc.profile}, order: p.doc.order}
}

// at is the place of p's n-th segment.
func (p *prop) at(n int) where {
	w := p.where()
	w.Line, w.Path = p.segs[n].line, joinSegs(p.segs[:n+1])
	return w
}

func (p *prop) fail(ld *loader, n int, format string, args ...any) {
	ld.l.add(p.at(n), format, args...)
}

// document is one YAML document or one part of a .properties file.
type document struct {
	file        string
	order       int    // the file's place among those read
	profile     string // the profile expression that activates it, or ""
	fileProfile string // the profile of the profile file it is in, or ""
	line        int    // of that expression
	props       []prop
}

// splitKey appends the segments of a key as written: dots separate them,
// [n] is a list index and [a.b] a key with dots in it.
func splitKey(k string, line int, out []seg) []seg {
	for {
		if j := strings.IndexByte(k, ']'); strings.HasPrefix(k, "[") && j > 0 {
			out = append(out, seg{name: k[1:j], line: line, index: allDigits(k[1:j])})
			if k = strings.TrimPrefix(k[j+1:], "."); k == "" {
				return out
			}
			continue
		}
		i := strings.IndexAny(k, ".[")
		if i < 0 || i == 0 && k[0] == '[' { // the end, or a "[" never closed
			return append(out, seg{name: k, line: line})
		}
		out = append(out, seg{name: k[:i], line: line})
		k = strings.TrimPrefix(k[i:], ".")
	}
}

// flattener turns YAML documents into properties.
type flattener struct {
	l      *errList
	ids    keyIDs
	doc    *document
	visits int // keys, values and list items still allowed
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// readYAML reads the documents of a YAML file.
func readYAML(data []byte, file string, order int, ld *loader) []*document {
	l := &ld.l
	f := &flattener{l: l, ids: ld.ids, visits: len(data) + extraVisits}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*document
	for f.visits >= 0 {
		var root yaml.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			w, msg := where{Error: Error{File: file}, order: order}, strings.TrimPrefix(err.Error(), "yaml: ")
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
				w.Line, _ = strconv.Atoi(m[1])
				msg = err.Error()[len(m[0]):]
				if lines := bytes.Split(data, []byte("\n")); w.Line <= len(lines) && bytes.ContainsRune(lines[w.Line-1], '\t') {
					msg += " (a tab: YAML indents with spaces only)"
				}
			} else if _, a, ok := strings.Cut(msg, "unknown anchor '"); ok {
				w.Line = 1 + bytes.Count(data[:max(0, bytes.Index(data, []byte("*"+strings.TrimSuffix(a, "' referenced"))))], []byte("\n"))
			}
			l.add(w, "invalid YAML: %s", msg)
			return nil
		}
		f.doc = &document{file: file, order: order}
		docs = append(docs, f.doc)
		if len(root.Content) == 0 {
			continue
		}
		switch n := f.deref(root.Content[0], nil); {
		case n == nil || isNull(n):
		case n.Kind == yaml.MappingNode:
			f.mapping(n, nil, map[string]int{}, false, 0)
		default:
			hint := ""
			if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "=") {
				hint = " (only YAML is read here: LoadFile reads an application.properties file by its extension)"
			}
			l.add(where{Error: Error{File: file, Line: n.Line}, order: order}, "the top level of the file must be a mapping of keys to values, got %s%s", describe(n), hint)
		}
	}
	return docs
}

// fail reports a problem at line, under the flattened key path.
func (f *flattener) fail(line int, path []seg, format string, args ...any) {
	f.l.add(where{Error: Error{File: f.doc.file, Line: line, Path: joinSegs(keep(path)), Profile: f.doc.profile}, order: f.doc.order}, format, args...)
}

// visit spends one unit of the budget, reporting false (once, with an
// error) when it is spent.
func (f *flattener) visit(line int, path []seg) bool {
	if f.visits--; f.visits == -1 {
		f.fail(line, path, "aliases and merge keys expand the file beyond what it may hold (one key, value or list item per byte plus %d)", extraVisits)
	}
	return f.visits >= 0
}

func (f *flattener) deref(n *yaml.Node, path []seg) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		if !f.visit(n.Line, path) {
			return nil
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// node flattens the value n found under path.
func (f *flattener) node(n *yaml.Node, path []seg, merged bool) {
	if n = f.deref(n, path); n == nil || !f.visit(n.Line, path) {
		return
	}
	p := prop{segs: keep(path), merged: merged, doc: f.doc}
	switch {
	case n.Kind == yaml.MappingNode && len(n.Content) > 0:
		f.mapping(n, path, map[string]int{}, merged, 0)
		return
	case n.Kind == yaml.SequenceNode && len(n.Content) > 0:
		path = slices.Grow(path, 1) // once: the items share its array
		for i, item := range n.Content {
			segs := append(path, seg{name: strconv.Itoa(i), line: item.Line, index: true})
			f.ids.number(segs, len(path), true)
			f.node(item, segs, merged)
		}
		return
	case n.Kind == yaml.MappingNode:
		p.kind = emptyMap
	case n.Kind == yaml.SequenceNode:
		p.kind = emptyList
	case isNull(n):
		p.kind = null
	default:
		p.value = n.Value
	}
	f.doc.props = append(f.doc.props, p)
}

// keep copies path for a property or an error (its array is shared with
// the keys after it): all of it, or its first maxSegs-1 segments and "…".
func keep(path []seg) []seg {
	if len(path) <= maxSegs {
		return slices.Clone(path)
	}
	last := path[len(path)-1]
	return append(path[:maxSegs-1:maxSegs-1], seg{name: "…", line: last.line, id: last.id})
}

// mapping flattens a mapping: its explicit keys, then those its merge keys
// (<<) bring in that no earlier key gives (seen). A key written twice is an
// error.
func (f *flattener) mapping(n *yaml.Node, path []seg, seen map[string]int, merged bool, depth int) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !f.visit(k.Line, path) {
			return
		}
		switch line, dup := seen[k.Value]; {
		case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
			merges = append(merges, v)
		case k.Kind != yaml.ScalarNode:
			f.fail(k.Line, path, "%s: keys must be plain strings", what(path))
		case dup && !merged:
			f.fail(k.Line, splitKey(k.Value, k.Line, path), "%s: key %q is given twice (first at line %d)", what(path), k.Value, line)
		case !dup:
			seen[k.Value] = k.Line
			// path's children share its array, grown here, not by each of them
			path = slices.Grow(path, strings.Count(k.Value, ".")+strings.Count(k.Value, "[")+1)
			segs := splitKey(k.Value, k.Line, path)
			f.ids.number(segs, len(path), true)
			f.node(v, segs, merged)
		}
	}
	for _, m := range merges {
		if depth >= maxMergeDepth {
			f.fail(m.Line, path, "%s: merge keys (<<) nest more than %d deep", what(path), maxMergeDepth)
			f.visits = -2 // stop reading: the error says why
			return
		}
		if m = f.deref(m, path); m == nil {
			return
		}
		srcs := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			srcs = m.Content // a list of mappings
		}
		for _, src := range srcs {
			if src = f.deref(src, path); src == nil {
				return
			}
			if src.Kind != yaml.MappingNode {
				f.fail(src.Line, path, "%s: a merge key (<<) must name a mapping or a list of mappings", what(path))
				return
			}
			f.mapping(src, path, seen, true, depth+1)
		}
	}
}

func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return map[bool]string{true: "a mapping", false: "a list"}[n.Kind == yaml.MappingNode]
}

// what describes the entry a flattened key is in, for errors found while
// reading the file: `semaphore instance "a"`, or the key.
func what(path []seg) string {
	s := path
	if len(s) > 0 && normalize(s[0].name) == "resilience4j" {
		s = s[1:]
	}
	if len(s) >= 3 {
		k := map[string]string{"bulkhead": "semaphore", "threadpoolbulkhead": "pool"}[normalize(s[0].name)]
		if c := normalize(s[1].name); k != "" && (c == "configs" || c == "instances" || c == "backends") {
			return fmt.Sprintf("%s %q", section(k, c == "configs"), s[2].name)
		}
	}
	if len(path) == 0 {
		return "the top level of the file"
	}
	return joinSegs(keep(path))
}

// readProperties reads a .properties file as java.util.Properties does;
// "#---" or "!---" lines separate documents, as in Spring.
func readProperties(data []byte, file string, order int, ld *loader) []*document {
	l, doc := &ld.l, &document{file: file, order: order}
	docs := []*document{doc}
	lines := strings.Split(strings.TrimPrefix(string(data), "\ufeff"), "\n") // a byte order mark
	trim := func(i int) string { return strings.TrimLeft(strings.TrimSuffix(lines[i], "\r"), " \t\f") }
	for i := 0; i < len(lines); i++ {
		line, start := trim(i), i+1
		if line == "#---" || line == "!---" {
			doc = &document{file: file, order: order}
			docs = append(docs, doc)
			continue
		}
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// A trailing \ (an odd number of them) joins the next line.
		for (len(line)-len(strings.TrimRight(line, `\`)))%2 == 1 && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + trim(i)
		}
		key, val := splitProperty(line)
		if !utf8.ValidString(key) {
			l.add(where{Error: Error{File: file, Line: start}, order: order}, "key %q is not valid UTF-8", key)
			continue
		}
		k, ok := unescape(key)
		v, vok := unescape(val)
		if !ok || !vok {
			l.add(where{Error: Error{File: file, Line: start}, order: order}, `malformed \uXXXX escape (four hex digits must follow \u)`)
			continue
		}
		segs := splitKey(k, start, nil)
		ld.ids.number(segs, 0, true)
		doc.props = append(doc.props, prop{segs: segs, value: v, doc: doc})
	}
	return docs
}

// splitProperty splits a line at the first unescaped '=', ':' or blank,
// as java.util.Properties does.
func splitProperty(line string) (key, val string) {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '=', ':', ' ', '\t', '\f':
			rest := strings.TrimLeft(line[i+1:], " \t\f")
			if blank := line[i] != '=' && line[i] != ':'; blank && rest != "" && (rest[0] == '=' || rest[0] == ':') {
				rest = strings.TrimLeft(rest[1:], " \t\f")
			}
			return line[:i], rest
		}
	}
	return line, ""
}

var escapes = strings.NewReplacer(`\t`, "\t", `\n`, "\n", `\r`, "\r", `\f`, "\f")

// unescape undoes the escapes of a .properties file: \t, \n, \r, \f,
// \uXXXX (a UTF-16 surrogate pair as one character), and a backslash before
// any other character; it reports false for a \u without four hex digits.
func unescape(s string) (string, bool) {
	if !strings.Contains(s, `\`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if s[i] == 'u' {
			r, err := strconv.ParseUint(s[i+1:min(len(s), i+5)], 16, 16)
			if err != nil || i+5 > len(s) {
				return "", false
			}
			i += 4
			if lo, err := strconv.ParseUint(s[min(len(s), i+3):min(len(s), i+7)], 16, 16); utf16.IsSurrogate(rune(r)) && strings.HasPrefix(s[i+1:], `\u`) && err == nil && len(s) >= i+7 {
				if c := utf16.DecodeRune(rune(r), rune(lo)); c != utf8.RuneError {
					r, i = uint64(c), i+6
				}
			}
			b.WriteRune(rune(r))
		} else if e := escapes.Replace(s[i-1 : i+1]); len(e) == 1 {
			b.WriteString(e)
		} else {
			b.WriteByte(s[i])
		}
	}
	return b.String(), true
}

func joinSegs(segs []seg) string {
	var b strings.Builder
	for i, s := range segs {
		if i > 0 && !s.index {
			b.WriteByte('.')
		}
		if s.index || strings.Contains(s.name, ".") {
			s.name = "[" + s.name + "]"
		}
		b.WriteString(s.name)
	}
	return b.String()
}

// normalize folds the spellings Spring's relaxed binding accepts
// (maxWaitDuration, max-wait-duration, max_wait_duration) into one.
func normalize(k string) string {
	b := make([]byte, 0, len(k))
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= 'A' && c <= 'Z' {
			b = append(b, c+'a'-'A')
		} else if c != '-' && c != '_' {
			b = append(b, c)
		}
	}
	return string(b)
}

func normSegs(segs []seg) string {
	var b strings.Builder
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(normalize(s.name))
	}
	return b.String()
}
