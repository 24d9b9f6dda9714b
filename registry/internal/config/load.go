package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Source is one file read: its name and content.
type Source struct {
	Name string
	Data []byte
}

// Env looks up an environment variable, as os.LookupEnv does.
type Env func(string) (string, bool)

// Load reads one YAML file (file names it in errors, or is "").
func Load(data []byte, file string, env Env) (Config, error) {
	if len(data) > MaxFileSize {
		return Config{}, &Error{File: file, Msg: fmt.Sprintf("the configuration is larger than %d bytes", MaxFileSize)}
	}
	ld := newLoader(env)
	docs := readYAML(data, file, 0, ld)
	return ld.finish(docs, ld.profiles(docs))
}

// LoadFile reads the file at path (YAML, or .properties by its extension)
// and its profile files beside it, in Spring's order, and returns every
// file it read.
func LoadFile(path string, env Env) (Config, []Source, error) {
	ld := newLoader(env)
	var srcs []Source
	var docs []*document
	read := func(path, profile string) error {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("registry: %w", err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
		if err != nil {
			return fmt.Errorf("registry: reading %s: %w", path, err)
		} else if len(data) > MaxFileSize {
			return &Error{File: path, Msg: fmt.Sprintf("the configuration is larger than %d bytes", MaxFileSize)}
		}
		srcs = append(srcs, Source{path, data})
		read := readYAML
		if filepath.Ext(path) == ".properties" {
			read = readProperties
		}
		for _, d := range read(data, path, len(srcs)-1, ld) {
			d.fileProfile = profile
			docs = append(docs, d)
		}
		return nil
	}
	if err := read(path, ""); err != nil {
		return Config{}, nil, err
	}
	profiles := ld.profiles(docs)
	stem := strings.TrimSuffix(path, filepath.Ext(path))
	for _, p := range profiles {
		if strings.ContainsAny(p, `/\`) || p == ".." {
			ld.l.add(where{Error: Error{File: path}}, "profile %q cannot name a file beside %s", p, filepath.Base(path))
			continue
		}
		for _, e := range []string{".yaml", ".yml", ".properties"} {
			if err := read(stem+"-"+p+e, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return Config{}, nil, err
			}
		}
	}
	cfg, err := ld.finish(docs, profiles)
	return cfg, srcs, err
}

// docProfile reads a document's activation (spring.config.activate.on-profile
// or the legacy spring.profiles) and its spring.profiles.active.
func docProfile(d *document) (active []*prop) {
	var on []string
	for i := range d.props {
		p := &d.props[i]
		k := normSegs(p.segs)
		if j := strings.LastIndexByte(k, '.'); j > 0 && p.segs[len(p.segs)-1].index {
			k = k[:j] // a list item
		}
		switch k {
		case "spring.config.activate.onprofile", "spring.profiles":
			on = append(on, p.value)
			d.line = p.line()
		case "spring.profiles.active":
			active = append(active, p)
		}
	}
	d.profile = strings.Join(on, ",")
	return active
}

// profiles returns the active profiles: SPRING_PROFILES_ACTIVE, or the last
// spring.profiles.active of the main file's documents, or "default"; its
// placeholders resolve from the environment and those documents, as in Spring.
func (ld *loader) profiles(docs []*document) []string {
	var active []*prop
	for _, d := range docs {
		if a := docProfile(d); len(a) > 0 && d.profile == "" {
			active = a
		}
		for i := range d.props {
			if d.profile == "" {
				ld.props[d.props[i].id()] = &d.props[i]
			}
		}
	}
	defer clear(ld.props)
	defer clear(ld.done)
	list, ok := ld.env("SPRING_PROFILES_ACTIVE")
	if !ok || strings.TrimSpace(list) == "" {
		var vals []string
		for _, p := range active {
			if v, err := ld.expand(p.value, nil); err != nil {
				ld.l.add(p.where(), "spring.profiles.active: %s", err)
			} else {
				vals = append(vals, v)
			}
		}
		list = strings.Join(vals, ",")
	}
	var out []string
	for p := range strings.SplitSeq(list, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []string{defaultName}
	}
	return out
}

// finish selects the documents the active profiles activate, resolves
// precedence and binds the result.
func (ld *loader) finish(docs []*document, profiles []string) (Config, error) {
	var active []*document
	for _, d := range docs {
		if d.profile != "" || d.fileProfile != "" {
			for _, p := range docProfile(d) {
				ld.l.add(p.where(), "spring.profiles.active is not allowed in a profile-specific document or file (Spring refuses it too); set it in a document without spring.config.activate.on-profile")
			}
		}
		if ok, err := matches(d.profile, profiles); d.profile == "" || ok {
			active = append(active, d)
		} else if err != nil {
			ld.l.add(where{Error: Error{File: d.file, Line: d.line, Profile: d.profile}, order: d.order}, "spring.config.activate.on-profile: %s", err)
		}
	}
	for _, d := range active {
		for i := range d.props {
			ld.props[d.props[i].id()] = &d.props[i] // later wins; placeholders resolve in bind
		}
		ld.bindDoc(d)
	}
	bind(ld, ld.sem, &ld.cfg.SemaphoreConfigs, &ld.cfg.Semaphores, (*SemaphoreSpec).bind)
	bind(ld, ld.pool, &ld.cfg.PoolConfigs, &ld.cfg.Pools, (*PoolSpec).bind)
	if len(ld.l.errs) == 0 && len(ld.cfg.SemaphoreConfigs)+len(ld.cfg.Semaphores)+len(ld.cfg.PoolConfigs)+len(ld.cfg.Pools) == 0 {
		msg := "the file configures no bulkhead: expected resilience4j.bulkhead or resilience4j.thread-pool-bulkhead with configs or instances"
		if ld.hint != "" {
			msg += fmt.Sprintf(" (is %q a misspelt resilience4j?)", ld.hint)
		}
		ld.l.add(where{}, "%s", msg)
	}
	resolve(ld.cfg, &ld.l, func(k string, shared bool, name, key string) where {
		return map[string]*binder{"semaphore": ld.sem, "pool": ld.pool}[k].locate(shared, name, key)
	})
	ld.cfg.Warnings = ld.l.warns
	if len(ld.l.errs) > 0 {
		return Config{}, ld.l.err()
	}
	return ld.cfg, nil
}

// matches reports whether a Spring profile expression (names, !, & and |
// not mixed without parentheses, commas between alternatives) holds.
func matches(expr string, active []string) (bool, error) {
	any := false
	for part := range strings.SplitSeq(expr, ",") {
		toks := strings.Fields(strings.NewReplacer("(", " ( ", ")", " ) ", "&", " & ", "|", " | ", "!", " ! ").Replace(part))
		v, rest, err := profileExpr(toks, active)
		if err == nil && len(rest) > 0 {
			err = fmt.Errorf("unexpected %q", rest[0])
		}
		if err != nil {
			return false, fmt.Errorf("malformed profile expression %q: %w", expr, err)
		}
		any = any || v
	}
	return any, nil
}

// profileExpr reads operands joined by one of & and |, from toks.
func profileExpr(toks, active []string) (bool, []string, error) {
	v, toks, err := profileUnary(toks, active)
	op := ""
	for err == nil && len(toks) > 0 && (toks[0] == "&" || toks[0] == "|") {
		if op != "" && toks[0] != op {
			return false, nil, errors.New("mix & and | only with parentheses")
		}
		var w bool
		op = toks[0]
		w, toks, err = profileUnary(toks[1:], active)
		v = map[bool]bool{true: v && w, false: v || w}[op == "&"]
	}
	return v, toks, err
}

func profileUnary(toks, active []string) (bool, []string, error) {
	t := ""
	if len(toks) > 0 {
		t = toks[0]
	}
	switch t {
	case "!":
		v, rest, err := profileUnary(toks[1:], active)
		return !v, rest, err
	case "(":
		v, rest, err := profileExpr(toks[1:], active)
		if err == nil && (len(rest) == 0 || rest[0] != ")") {
			err = errors.New("missing )")
		}
		if err != nil {
			return false, nil, err
		}
		return v, rest[1:], nil
	case "", ")", "&", "|":
		return false, nil, errors.New("a profile name is missing")
	default:
		return slices.Contains(active, t), toks[1:], nil
	}
}
