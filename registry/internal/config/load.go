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
	docs := readYAML(data, file, 0, &ld.l)
	return ld.finish(docs, nil)
}

// LoadFile reads the file at path (YAML, or .properties by its extension)
// and the profile files beside it (path's name with -{profile} before its
// extension, in .yaml, .yml and .properties, later over earlier, as Spring
// orders them). It returns the configuration and every file it read.
func LoadFile(path string, env Env) (Config, []Source, error) {
	main, err := readSource(path)
	if err != nil {
		return Config{}, nil, err
	}
	ld := newLoader(env)
	srcs := []Source{main}
	docs := ld.read(main, 0)
	profiles := ld.profiles(docs)
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(path, ext)
	for _, p := range profiles {
		if strings.ContainsAny(p, `/\`) || p == ".." {
			ld.l.add(where{file: path}, "profile %q cannot name a file beside %s", p, filepath.Base(path))
			continue
		}
		for _, e := range []string{".yaml", ".yml", ".properties"} {
			src, err := readSource(stem + "-" + p + e)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return Config{}, nil, err
			}
			srcs = append(srcs, src)
			for _, d := range ld.read(src, len(srcs)-1) {
				d.fileProfile = p
				docs = append(docs, d)
			}
		}
	}
	cfg, err := ld.finish(docs, profiles)
	return cfg, srcs, err
}

func readSource(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return Source{}, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return Source{}, fmt.Errorf("registry: reading %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return Source{}, &Error{File: path, Msg: fmt.Sprintf("the configuration is larger than %d bytes", MaxFileSize)}
	}
	return Source{Name: path, Data: data}, nil
}

func (ld *loader) read(src Source, order int) []*document {
	if filepath.Ext(src.Name) == ".properties" {
		return readProperties(src.Data, src.Name, order, &ld.l)
	}
	return readYAML(src.Data, src.Name, order, &ld.l)
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
// spring.profiles.active of the main file's documents, or "default".
func (ld *loader) profiles(docs []*document) []string {
	var active []*prop
	for _, d := range docs {
		if a := docProfile(d); len(a) > 0 && d.profile == "" {
			active = a
		}
	}
	var list string
	if v, ok := ld.env("SPRING_PROFILES_ACTIVE"); ok && strings.TrimSpace(v) != "" {
		list = v
	} else {
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
// precedence and binds the result. profiles is nil for Load (one file,
// whose profiles are still read).
func (ld *loader) finish(docs []*document, profiles []string) (Config, error) {
	if profiles == nil {
		profiles = ld.profiles(docs)
	}
	var active []*document
	for _, d := range docs {
		if d.profile == "" && d.fileProfile == "" {
			active = append(active, d)
			continue
		}
		for _, p := range docProfile(d) {
			ld.l.add(p.where(), "spring.profiles.active is not allowed in a profile-specific document or file (Spring refuses it too); set it in a document without spring.config.activate.on-profile")
		}
		if d.profile == "" {
			active = append(active, d)
			continue
		}
		ok, err := matches(d.profile, profiles)
		if err != nil {
			ld.l.add(where{file: d.file, order: d.order, line: d.line, profile: d.profile}, "spring.config.activate.on-profile: %s", err)
		}
		if ok {
			active = append(active, d)
		}
	}
	for _, d := range active {
		for i := range d.props {
			ld.props[normSegs(d.props[i].segs)] = &d.props[i] // later wins
		}
	}
	for _, d := range active {
		ld.bindDoc(d)
	}
	ld.bindAll()
	if len(ld.l.errs) == 0 && len(ld.cfg.SemaphoreConfigs)+len(ld.cfg.Semaphores)+len(ld.cfg.PoolConfigs)+len(ld.cfg.Pools) == 0 {
		msg := "the file configures no bulkhead: expected resilience4j.bulkhead or resilience4j.thread-pool-bulkhead with configs or instances"
		if ld.hint != "" {
			msg += fmt.Sprintf(" (is %q a misspelt resilience4j?)", ld.hint)
		}
		ld.l.add(where{}, "%s", msg)
	}
	resolve(ld.cfg, &ld.l, ld)
	ld.cfg.Warnings = ld.l.warns
	if len(ld.l.errs) > 0 {
		return Config{}, ld.l.err()
	}
	return ld.cfg, nil
}

// matches reports whether a Spring profile expression holds for the active
// profiles: names, !, & and | (not mixed without parentheses), and
// commas between alternatives.
func matches(expr string, active []string) (bool, error) {
	any := false
	for part := range strings.SplitSeq(expr, ",") {
		p := &exprParser{active: active}
		for _, f := range strings.Fields(strings.NewReplacer("(", " ( ", ")", " ) ", "&", " & ", "|", " | ", "!", " ! ").Replace(part)) {
			p.toks = append(p.toks, f)
		}
		v, err := p.expr()
		if err == nil && p.pos < len(p.toks) {
			err = fmt.Errorf("unexpected %q", p.toks[p.pos])
		}
		if err != nil {
			return false, fmt.Errorf("malformed profile expression %q: %w", expr, err)
		}
		any = any || v
	}
	return any, nil
}

type exprParser struct {
	toks   []string
	pos    int
	active []string
}

func (p *exprParser) next() string {
	if p.pos < len(p.toks) {
		p.pos++
		return p.toks[p.pos-1]
	}
	return ""
}

func (p *exprParser) expr() (bool, error) {
	v, err := p.unary()
	op := ""
	for err == nil && p.pos < len(p.toks) && (p.toks[p.pos] == "&" || p.toks[p.pos] == "|") {
		if t := p.next(); op != "" && t != op {
			return false, errors.New("mix & and | only with parentheses")
		} else {
			op = t
		}
		var w bool
		if w, err = p.unary(); op == "&" {
			v = v && w
		} else {
			v = v || w
		}
	}
	return v, err
}

func (p *exprParser) unary() (bool, error) {
	switch t := p.next(); t {
	case "!":
		v, err := p.unary()
		return !v, err
	case "(":
		v, err := p.expr()
		if err == nil && p.next() != ")" {
			err = errors.New("missing )")
		}
		return v, err
	case "", ")", "&", "|":
		return false, errors.New("a profile name is missing")
	default:
		return slices.Contains(p.active, t), nil
	}
}
