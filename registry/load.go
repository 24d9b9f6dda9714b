package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize is the largest YAML input Load and LoadFile read.
const MaxFileSize = 4 << 20

// maxMergedPairs bounds the key/value pairs that YAML merge keys ("<<") may
// expand to in one input, so that a crafted file cannot explode.
const maxMergedPairs = 100000

// Load reads a YAML configuration. It accepts the resilience4j section of a
// Spring Boot application.yml as is: resilience4j.bulkhead (semaphore
// bulkheads) and resilience4j.thread-pool-bulkhead (pool bulkheads), each
// with configs.<name> and instances.<name> (or backends.<name>), with or
// without the resilience4j: wrapper. Other top-level sections are ignored.
// Keys may be written in camelCase, kebab-case or snake_case, and dotted as
// Spring flattens them (resilience4j.bulkhead.instances.payment.maxConcurrentCalls);
// inside the bulkhead sections an unknown key is an error, including one
// brought in by a merge key (<<), and so is a misspelt bulkhead section
// under resilience4j:. Spring placeholders (${VAR:default}) are refused,
// not resolved. See docs/configuration.md for every key.
//
// Load checks every value and every baseConfig reference. Its error joins
// one [*ConfigError] per problem (up to 20), each with the line, the path,
// the instance, the field and the value.
func Load(r io.Reader) (Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("registry: reading configuration: %w", err)
	}
	return load(data, "")
}

// LoadFile reads the YAML configuration in the named file, as [Load] does.
func LoadFile(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("registry: reading %s: %w", path, err)
	}
	return load(data, path)
}

func load(data []byte, file string) (cfg Config, err error) {
	defer func() {
		// The loader must never panic on any input; should the YAML
		// library ever do so, report it as a bad file.
		if p := recover(); p != nil {
			cfg, err = Config{}, &ConfigError{File: file, Msg: fmt.Sprintf("invalid YAML: %v", p)}
		}
	}()
	if len(data) > MaxFileSize {
		return Config{}, &ConfigError{File: file, Msg: fmt.Sprintf("the configuration is larger than %d bytes", MaxFileSize)}
	}
	ld := &loader{file: file, pos: map[posKey]posVal{}, sections: map[string]posVal{}, split: map[*yaml.Node]string{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 0; ; doc++ {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return Config{}, &ConfigError{File: file, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
		}
		ld.document(&n)
		if ld.l.full() {
			break
		}
	}
	if !ld.l.full() {
		ld.cfg.validate(&ld.l, ld)
	}
	for _, e := range ld.l.errs {
		var ce *ConfigError
		if errors.As(e, &ce) {
			ce.File = file
		}
	}
	if err := ld.l.err(); err != nil {
		return Config{}, err
	}
	return ld.cfg, nil
}

type posKey struct{ sec, name, field string }

type posVal struct {
	line int
	path string
	key  string // the field's key as written
}

type loader struct {
	file     string
	l        errList
	cfg      Config
	pos      map[posKey]posVal
	sections map[string]posVal // section -> where it was first seen
	merged   int               // pairs produced by merge keys so far
	// split maps each key node made by splitting a dotted key to the key
	// as written; such keys are not split again.
	split map[*yaml.Node]string
}

// entry implements locator with the positions recorded while loading.
func (ld *loader) entry(sec, name, field string) (int, string, string) {
	if p, ok := ld.pos[posKey{sec, name, field}]; ok {
		return p.line, p.path, p.key
	}
	key := yamlName(field)
	if p, ok := ld.pos[posKey{sec, name, ""}]; ok {
		if field == "" {
			return p.line, p.path, ""
		}
		return p.line, p.path + "." + key, key
	}
	line, path, _ := goLocator{}.entry(sec, name, field)
	return line, path, key
}

// yamlName is the Spring spelling of a Go field name, for messages.
func yamlName(field string) string {
	switch field {
	case "":
		return ""
	case "MaxWorkers":
		return "maxThreadPoolSize"
	case "KeepAlive":
		return "keepAliveDuration"
	case "EventBufferSize":
		return "eventConsumerBufferSize"
	}
	return strings.ToLower(field[:1]) + field[1:]
}

// normalize folds the spellings Spring's relaxed binding accepts
// (maxWaitDuration, max-wait-duration, max_wait_duration) into one.
func normalize(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '-' || c == '_':
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

type pair struct {
	key, val *yaml.Node
	merged   bool // brought in by a merge key (<<)
}

// pairs lists a mapping's keys and values, explicit ones first, then those
// brought in by merge keys ("<<") that no explicit key overrides. It reports
// a non-mapping as an error.
//
// Keys are read as Spring reads them once it has flattened the file into
// properties: a dotted key is nested keys ("instances.payment: {...}" is
// "instances: {payment: {...}}"), "[a.b]" is one key holding dots, and the
// mappings given for one key in several forms are merged.
func (ld *loader) pairs(n *yaml.Node, path, what string) ([]pair, bool) {
	n = deref(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		ld.l.add(n.Line, path, "%s must be a mapping of keys to values, got %s", what, describe(n))
		return nil, false
	}
	var out, merged []pair
	ld.collect(n, path, what, &out, &merged, 0)
	if len(merged) > 0 {
		// YAML merge keys never override: an explicit key wins, then the
		// first merged one.
		seen := make(map[string]bool, len(out)+len(merged))
		for _, p := range out {
			if k := deref(p.key); k != nil && k.Kind == yaml.ScalarNode {
				seen[k.Value] = true
			}
		}
		for _, p := range merged {
			if k := deref(p.key); k != nil && k.Kind == yaml.ScalarNode {
				if seen[k.Value] {
					continue
				}
				seen[k.Value] = true
			}
			out = append(out, p)
		}
	}
	return ld.expand(out, path, what), true
}

// expand splits dotted keys into nested mappings and merges the mappings
// given for one key, keeping the first occurrence's place.
func (ld *loader) expand(ps []pair, path, what string) []pair {
	out := make([]pair, 0, len(ps))
	type group struct {
		at      int          // index in out
		content []*yaml.Node // key/value nodes of every mapping given for the key
		n       int          // how many mappings
	}
	var groups map[string]*group
	for _, p := range ps {
		key, val := p.key, p.val
		if k := deref(p.key); k != nil && k.Kind == yaml.ScalarNode {
			if _, done := ld.split[k]; !done {
				segs, ok := splitKey(k.Value)
				if !ok {
					ld.l.add(k.Line, joinPath(path, k.Value), "%s: key %q is not a valid property name: a part between dots is empty or a \"[\" is not closed", what, k.Value)
					continue
				}
				if len(segs) > 1 || segs[0] != k.Value {
					for i := len(segs) - 1; i >= 1; i-- {
						val = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: k.Line, Column: k.Column,
							Content: []*yaml.Node{ld.splitKeyNode(k, segs[i]), val}}
					}
					key = ld.splitKeyNode(k, segs[0])
				}
			}
			name := deref(key).Value
			if v := deref(val); v != nil && (v.Kind == yaml.MappingNode || isNull(v)) {
				if g, ok := groups[name]; ok {
					g.content = append(g.content, v.Content...)
					g.n++
					out[g.at].merged = out[g.at].merged && p.merged
					continue
				}
				if groups == nil {
					groups = map[string]*group{}
				}
				groups[name] = &group{at: len(out), content: v.Content, n: 1}
			}
		}
		out = append(out, pair{key: key, val: val, merged: p.merged})
	}
	for _, g := range groups {
		if g.n > 1 {
			first := deref(out[g.at].val)
			out[g.at].val = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: first.Line, Column: first.Column, Content: g.content}
		}
	}
	return out
}

func (ld *loader) splitKeyNode(from *yaml.Node, seg string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: seg, Line: from.Line, Column: from.Column}
	ld.split[n] = from.Value
	return n
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// splitKey splits a property key at its dots, as Spring does: "a.b.c" is
// a, b, c; a part in brackets is taken whole, dots included ("a.[b.c]" and
// "a[b.c]" are a, b.c). It reports false for an empty part or an unclosed
// bracket.
func splitKey(k string) ([]string, bool) {
	if !strings.ContainsAny(k, ".[") {
		return []string{k}, true
	}
	var segs []string
	for i := 0; i < len(k); {
		var seg string
		if k[i] == '[' {
			j := strings.IndexByte(k[i+1:], ']')
			if j < 0 {
				return nil, false
			}
			seg = k[i+1 : i+1+j]
			i += j + 2
			if i < len(k) && k[i] != '.' && k[i] != '[' {
				return nil, false
			}
		} else {
			j := strings.IndexAny(k[i:], ".[")
			if j < 0 {
				j = len(k) - i
			}
			if j == 0 {
				return nil, false
			}
			seg = k[i : i+j]
			i += j
		}
		segs = append(segs, seg)
		if i < len(k) && k[i] == '.' {
			i++
			if i == len(k) {
				return nil, false
			}
		}
	}
	return segs, true
}

func (ld *loader) collect(n *yaml.Node, path, what string, out, merged *[]pair, depth int) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			ld.merge(v, path, what, merged, depth)
			continue
		}
		if depth == 0 {
			*out = append(*out, pair{key: k, val: v})
		} else {
			*merged = append(*merged, pair{key: k, val: v, merged: true})
		}
	}
}

func (ld *loader) merge(v *yaml.Node, path, what string, merged *[]pair, depth int) {
	v = deref(v)
	if v == nil || depth >= 10 {
		ld.l.add(0, path, "%s: merge keys (<<) nest too deeply", what)
		return
	}
	var srcs []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		srcs = []*yaml.Node{v}
	case yaml.SequenceNode:
		for _, s := range v.Content {
			srcs = append(srcs, deref(s))
		}
	}
	if len(srcs) == 0 {
		ld.l.add(v.Line, path, "%s: a merge key (<<) must name a mapping", what)
		return
	}
	for _, s := range srcs {
		if s == nil || s.Kind != yaml.MappingNode {
			ld.l.add(v.Line, path, "%s: a merge key (<<) must name a mapping", what)
			return
		}
		ld.merged += len(s.Content) / 2
		if ld.merged > maxMergedPairs {
			ld.l.add(v.Line, path, "%s: merge keys (<<) expand to more than %d entries", what, maxMergedPairs)
			return
		}
		var out []pair
		ld.collect(s, path, what, &out, merged, depth+1)
	}
}

// origin explains where a key that is not written as such came from: a
// merge key, or a dotted key split at its dots.
func (ld *loader) origin(p pair) string {
	if p.merged {
		return " (brought in by a merge key <<)"
	}
	if full, ok := ld.split[p.key]; ok {
		return fmt.Sprintf(" (from the dotted key %q; write a name that holds dots as \"[a.b]\")", full)
	}
	return ""
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

// keyText returns a mapping key as a string, or false (after reporting)
// when it is not a scalar.
func (ld *loader) keyText(k *yaml.Node, path, what string) (string, bool) {
	k = deref(k)
	if k == nil || k.Kind != yaml.ScalarNode {
		line := 0
		if k != nil {
			line = k.Line
		}
		ld.l.add(line, path, "%s: keys must be plain strings", what)
		return "", false
	}
	return k.Value, true
}

func (ld *loader) document(doc *yaml.Node) {
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return
		}
		root = root.Content[0]
	}
	root = deref(root)
	if isNull(root) {
		return
	}
	ps, ok := ld.pairs(root, "", "the top level of the file")
	if !ok {
		return
	}
	for _, p := range ps {
		k, ok := ld.keyText(p.key, "", "the top level of the file")
		if !ok {
			continue
		}
		switch nk := normalize(k); nk {
		case "resilience4j":
			inner, ok := ld.pairs(p.val, k, k)
			if !ok {
				continue
			}
			for _, q := range inner {
				ik, ok := ld.keyText(q.key, k, k)
				if !ok {
					continue
				}
				switch nik := normalize(ik); nik {
				case "bulkhead":
					ld.section(q.key, q.val, k+"."+ik, false)
				case "threadpoolbulkhead":
					ld.section(q.key, q.val, k+"."+ik, true)
				default:
					// Other Resilience4j sections are not ours, but one
					// that is a letter or two from ours is a typo that
					// would lose the whole section.
					if r4jSections[nik] {
						continue
					}
					if s := nearSection(nik); s != "" {
						ld.l.add(q.key.Line, k+"."+ik, "unknown section %q in %s (did you mean %q?); a bulkhead section spelt wrong would be ignored", ik, k, s)
					}
				}
			}
		case "bulkhead":
			ld.section(p.key, p.val, k, false)
		case "threadpoolbulkhead":
			ld.section(p.key, p.val, k, true)
		}
	}
}

// r4jSections are the sections of resilience4j (normalized) that the
// loader knowingly ignores.
var r4jSections = map[string]bool{
	"circuitbreaker": true, "retry": true, "ratelimiter": true, "timelimiter": true,
	"scheduled": true, "micrometer": true, "cache": true, "fallback": true,
}

// nearSection returns the bulkhead section nk is probably a misspelling of,
// or "".
func nearSection(nk string) string {
	switch {
	case distance(nk, "bulkhead") <= 2:
		return "bulkhead"
	case distance(nk, "threadpoolbulkhead") <= 2:
		return "thread-pool-bulkhead"
	}
	return ""
}

func (ld *loader) section(key, val *yaml.Node, path string, isPool bool) {
	id := "bulkhead"
	if isPool {
		id = "thread-pool-bulkhead"
	}
	if first, ok := ld.sections[id]; ok {
		ld.l.add(key.Line, path, "the %s section appears twice (first at line %d as %s); write it once", id, first.line, first.path)
		return
	}
	ld.sections[id] = posVal{line: key.Line, path: path}
	ps, ok := ld.pairs(val, path, path)
	if !ok {
		return
	}
	instSec, cfgSec := "Semaphores", "SemaphoreConfigs"
	if isPool {
		instSec, cfgSec = "Pools", "PoolConfigs"
	}
	seenKey := map[string]int{}
	for _, p := range ps {
		k, ok := ld.keyText(p.key, path, path)
		if !ok {
			continue
		}
		nk := normalize(k)
		if nk == "backends" {
			nk = "instances" // Spring's alias; both may appear, names may not repeat
		}
		if line, dup := seenKey[nk]; dup && nk != "instances" {
			if !p.merged {
				ld.l.add(p.key.Line, path+"."+k, "%s: key %q is given twice (first at line %d)", path, k, line)
			}
			continue
		}
		seenKey[nk] = p.key.Line
		switch nk {
		case "configs":
			ld.entries(p.val, path+"."+k, cfgSec, isPool)
		case "instances":
			ld.entries(p.val, path+"."+k, instSec, isPool)
		case "tags":
			// Registry tags: names for Micrometer; accepted, not used.
			ld.stringMap(p.val, path+"."+k)
		case "metrics":
			ld.metrics(p.val, path+"."+k)
		case "bulkheadaspectorder", "threadpoolbulkheadaspectorder":
			// Spring AOP ordering: accepted, no effect.
			if v := deref(p.val); v == nil || v.Kind != yaml.ScalarNode {
				ld.l.add(p.key.Line, path+"."+k, "%s: %s must be an integer", path, k)
			} else if _, err := strconv.Atoi(strings.TrimSpace(v.Value)); err != nil {
				ld.l.add(v.Line, path+"."+k, "%s: %s must be an integer, got %q", path, k, v.Value)
			}
		default:
			ld.l.add(p.key.Line, path+"."+k, "unknown key %q%s in %s%s", k, ld.origin(p), path,
				suggest(nk, []string{"configs", "instances", "backends", "tags", "metrics"}))
		}
	}
}

func (ld *loader) stringMap(n *yaml.Node, path string) {
	ps, ok := ld.pairs(n, path, path)
	if !ok {
		return
	}
	for _, p := range ps {
		if v := deref(p.val); v == nil || v.Kind != yaml.ScalarNode {
			ld.l.add(p.key.Line, path, "%s: values must be plain strings", path)
		}
	}
}

func (ld *loader) metrics(n *yaml.Node, path string) {
	ps, ok := ld.pairs(n, path, path)
	if !ok {
		return
	}
	for _, p := range ps {
		k, ok := ld.keyText(p.key, path, path)
		if !ok {
			continue
		}
		switch normalize(k) {
		case "enabled":
			ld.boolean(p.val, path+"."+k, path, k)
		case "legacy":
			inner, ok := ld.pairs(p.val, path+"."+k, path+"."+k)
			if !ok {
				continue
			}
			for _, q := range inner {
				ik, ok := ld.keyText(q.key, path+"."+k, path+"."+k)
				if !ok {
					continue
				}
				if normalize(ik) != "enabled" {
					ld.l.add(q.key.Line, path+"."+k+"."+ik, "unknown key %q%s in %s.%s", ik, ld.origin(q), path, k)
					continue
				}
				ld.boolean(q.val, path+"."+k+"."+ik, path+"."+k, ik)
			}
		default:
			ld.l.add(p.key.Line, path+"."+k, "unknown key %q%s in %s%s", k, ld.origin(p), path, suggest(normalize(k), []string{"enabled", "legacy"}))
		}
	}
}

// entries reads configs.<name> or instances.<name>.
func (ld *loader) entries(n *yaml.Node, path, sec string, isPool bool) {
	ps, ok := ld.pairs(n, path, path)
	if !ok {
		return
	}
	for _, p := range ps {
		name, ok := ld.keyText(p.key, path, path)
		if !ok {
			continue
		}
		epath := path + "." + name
		if prev, dup := ld.pos[posKey{sec, name, ""}]; dup {
			if !p.merged {
				ld.l.add(p.key.Line, epath, "%s is given twice (first at line %d)", what(sec, name), prev.line)
			}
			continue
		}
		ld.pos[posKey{sec, name, ""}] = posVal{line: p.key.Line, path: epath}
		if isPool {
			s := ld.poolSpec(p.val, epath, sec, name)
			if sec == "Pools" {
				if ld.cfg.Pools == nil {
					ld.cfg.Pools = map[string]PoolSpec{}
				}
				ld.cfg.Pools[name] = s
			} else {
				if ld.cfg.PoolConfigs == nil {
					ld.cfg.PoolConfigs = map[string]PoolSpec{}
				}
				ld.cfg.PoolConfigs[name] = s
			}
		} else {
			s := ld.semaphoreSpec(p.val, epath, sec, name)
			if sec == "Semaphores" {
				if ld.cfg.Semaphores == nil {
					ld.cfg.Semaphores = map[string]SemaphoreSpec{}
				}
				ld.cfg.Semaphores[name] = s
			} else {
				if ld.cfg.SemaphoreConfigs == nil {
					ld.cfg.SemaphoreConfigs = map[string]SemaphoreSpec{}
				}
				ld.cfg.SemaphoreConfigs[name] = s
			}
		}
	}
}

var semaphoreKeys = []string{"maxConcurrentCalls", "maxWaitDuration", "baseConfig", "eventConsumerBufferSize", "writableStackTraceEnabled"}

var poolKeys = []string{"maxThreadPoolSize", "maxWorkers", "coreThreadPoolSize", "queueCapacity", "keepAliveDuration", "keepAlive", "maxWaitDuration", "baseConfig", "eventConsumerBufferSize", "writableStackTraceEnabled", "contextPropagators"}

// fields walks an entry's keys, calling set with the Go field each key sets
// ("" for keys accepted without effect) and reporting unknown or repeated
// keys.
func (ld *loader) fields(n *yaml.Node, epath, sec, name string, goField func(nk string) (string, bool), keys []string, set func(field, key string, v *yaml.Node)) {
	w := what(sec, name)
	ps, ok := ld.pairs(n, epath, w)
	if !ok {
		return
	}
	seen := map[string]int{}
	for _, p := range ps {
		k, ok := ld.keyText(p.key, epath, w)
		if !ok {
			continue
		}
		nk := normalize(k)
		f, known := goField(nk)
		if !known {
			ld.l.add(p.key.Line, epath+"."+k, "%s: unknown key %q%s%s", w, k, ld.origin(p), suggest(nk, keys))
			continue
		}
		id := f
		if id == "" {
			id = nk
		}
		if line, dup := seen[id]; dup {
			if !p.merged {
				ld.l.add(p.key.Line, epath+"."+k, "%s: %s is given twice (first at line %d)", w, k, line)
			}
			continue
		}
		seen[id] = p.key.Line
		v := deref(p.val)
		if v == nil {
			ld.l.add(p.key.Line, epath+"."+k, "%s: %s has an unusable value", w, k)
			continue
		}
		if f != "" {
			ld.pos[posKey{sec, name, f}] = posVal{line: v.Line, path: epath + "." + k, key: k}
		}
		set(f, k, v)
	}
}

func (ld *loader) semaphoreSpec(n *yaml.Node, epath, sec, name string) SemaphoreSpec {
	var s SemaphoreSpec
	goField := func(nk string) (string, bool) {
		switch nk {
		case "maxconcurrentcalls":
			return "MaxConcurrentCalls", true
		case "maxwaitduration":
			return "MaxWaitDuration", true
		case "baseconfig":
			return "BaseConfig", true
		case "eventconsumerbuffersize":
			return "EventBufferSize", true
		case "writablestacktraceenabled":
			return "", true
		}
		return "", false
	}
	ld.fields(n, epath, sec, name, goField, semaphoreKeys, func(f, key string, v *yaml.Node) {
		path := epath + "." + key
		switch f {
		case "MaxConcurrentCalls":
			s.MaxConcurrentCalls = ld.integer(v, path, sec, name, key)
		case "MaxWaitDuration":
			s.MaxWaitDuration = ld.duration(v, path, sec, name, key)
		case "BaseConfig":
			s.BaseConfig = ld.str(v, path, sec, name, key)
		case "EventBufferSize":
			s.EventBufferSize = ld.integer(v, path, sec, name, key)
		default:
			ld.boolean(v, path, what(sec, name), key)
		}
	})
	return s
}

func (ld *loader) poolSpec(n *yaml.Node, epath, sec, name string) PoolSpec {
	var s PoolSpec
	goField := func(nk string) (string, bool) {
		switch nk {
		case "maxthreadpoolsize", "maxworkers":
			return "MaxWorkers", true
		case "queuecapacity":
			return "QueueCapacity", true
		case "keepaliveduration", "keepalive":
			return "KeepAlive", true
		case "maxwaitduration":
			return "MaxWaitDuration", true
		case "baseconfig":
			return "BaseConfig", true
		case "eventconsumerbuffersize":
			return "EventBufferSize", true
		case "corethreadpoolsize", "writablestacktraceenabled", "contextpropagators":
			return "", true
		}
		return "", false
	}
	ld.fields(n, epath, sec, name, goField, poolKeys, func(f, key string, v *yaml.Node) {
		path := epath + "." + key
		switch f {
		case "MaxWorkers":
			s.MaxWorkers = ld.integer(v, path, sec, name, key)
		case "QueueCapacity":
			s.QueueCapacity = ld.integer(v, path, sec, name, key)
		case "KeepAlive":
			s.KeepAlive = ld.duration(v, path, sec, name, key)
		case "MaxWaitDuration":
			s.MaxWaitDuration = ld.duration(v, path, sec, name, key)
		case "BaseConfig":
			s.BaseConfig = ld.str(v, path, sec, name, key)
		case "EventBufferSize":
			s.EventBufferSize = ld.integer(v, path, sec, name, key)
		default:
			switch normalize(key) {
			case "corethreadpoolsize":
				// Accepted for Spring files; a Go pool has no core size.
				if p := ld.integer(v, path, sec, name, key); p != nil && (*p < 0 || *p > MaxLimit) {
					ld.l.add(v.Line, path, "%s: %s must be between 0 and %d, got %d", what(sec, name), key, MaxLimit, *p)
				}
			case "writablestacktraceenabled":
				ld.boolean(v, path, what(sec, name), key)
			default: // contextPropagators: class names, no effect in Go
				if v.Kind == yaml.MappingNode {
					ld.l.add(v.Line, path, "%s: %s must be a list of names, got a mapping", what(sec, name), key)
				}
			}
		}
	})
	return s
}

func (ld *loader) scalar(v *yaml.Node, path, sec, name, key, want string) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		ld.l.add(v.Line, path, "%s: %s must be %s, got %s", what(sec, name), key, want, describe(v))
		return "", false
	}
	if isNull(v) {
		ld.l.add(v.Line, path, "%s: %s has no value; give %s or remove the key", what(sec, name), key, want)
		return "", false
	}
	if placeholder(v.Value) {
		ld.l.add(v.Line, path, "%s: %s is the Spring placeholder %q, which the loader does not resolve; write the value, or expand the file first (os.ExpandEnv)", what(sec, name), key, v.Value)
		return "", false
	}
	return strings.TrimSpace(v.Value), true
}

// placeholder reports whether s holds a Spring property placeholder such
// as ${PAY_MAX:2}.
func placeholder(s string) bool {
	i := strings.Index(s, "${")
	return i >= 0 && strings.IndexByte(s[i:], '}') > 0
}

func (ld *loader) integer(v *yaml.Node, path, sec, name, key string) *int {
	s, ok := ld.scalar(v, path, sec, name, key, "an integer")
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		ld.l.add(v.Line, path, "%s: %s must be an integer, got %q", what(sec, name), key, v.Value)
		return nil
	}
	// validate checks the range; values beyond any limit stop here so
	// that they fit an int on every platform.
	if n > 1<<31-1 || n < -1<<31 {
		ld.l.add(v.Line, path, "%s: %s is out of range, got %s", what(sec, name), key, s)
		return nil
	}
	i := int(n)
	return &i
}

func (ld *loader) duration(v *yaml.Node, path, sec, name, key string) *time.Duration {
	s, ok := ld.scalar(v, path, sec, name, key, "a duration")
	if !ok {
		return nil
	}
	d, err := parseDuration(s)
	if errors.Is(err, errRange) {
		ld.l.add(v.Line, path, "%s: %s is out of range, got %q (the largest duration is about 292 years)", what(sec, name), key, v.Value)
		return nil
	}
	if err != nil {
		ld.l.add(v.Line, path, "%s: %s must be a duration such as 500ms, 2s, PT2S or a number of milliseconds, got %q", what(sec, name), key, v.Value)
		return nil
	}
	return &d
}

func (ld *loader) str(v *yaml.Node, path, sec, name, key string) string {
	s, ok := ld.scalar(v, path, sec, name, key, "a config name")
	if !ok {
		return ""
	}
	if s == "" {
		ld.l.add(v.Line, path, "%s: %s must name a config, got %q", what(sec, name), key, v.Value)
	}
	return s
}

func (ld *loader) boolean(v *yaml.Node, path, w, key string) {
	v = deref(v)
	if v == nil || v.Kind != yaml.ScalarNode || isNull(v) {
		line := 0
		if v != nil {
			line = v.Line
		}
		ld.l.add(line, path, "%s: %s must be true or false", w, key)
		return
	}
	if placeholder(v.Value) {
		ld.l.add(v.Line, path, "%s: %s is the Spring placeholder %q, which the loader does not resolve; write the value, or expand the file first (os.ExpandEnv)", w, key, v.Value)
		return
	}
	if _, err := strconv.ParseBool(strings.TrimSpace(v.Value)); err != nil {
		ld.l.add(v.Line, path, "%s: %s must be true or false, got %q", w, key, v.Value)
	}
}

// suggest returns ` (did you mean "x"?)` for the known key nearest to nk,
// or "" when none is near.
func suggest(nk string, keys []string) string {
	best, bestD := "", 4
	for _, k := range keys {
		if d := distance(nk, normalize(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return "; known keys: " + strings.Join(keys, ", ")
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
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
