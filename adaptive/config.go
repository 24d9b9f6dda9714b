package adaptive

import (
	"cmp"
	"fmt"
	"math"
	"time"
)

// The limits a Config may name. MaxLimit matches the bulkheads' own bound;
// a window of more than a day would adapt to nothing (and a window near
// the largest Duration would overflow the clock arithmetic).
const (
	maxLimit  = 1 << 20
	maxWindow = 24 * time.Hour
)

// Config is a controller's configuration. Every zero field means the default
// named in its comment, so the zero Config is [DefaultConfig]; the YAML keys
// are the names in the tags.
type Config struct {
	// Algorithm is "vegas" (the default when empty), "gradient2" or "aimd".
	// It is ignored when Custom is set.
	Algorithm string `yaml:"algorithm" json:"algorithm"`
	// MinLimit and MaxLimit bound the limit; 0 means 1 and 200.
	MinLimit int `yaml:"minLimit" json:"minLimit"`
	MaxLimit int `yaml:"maxLimit" json:"maxLimit"`
	// InitialLimit is the limit set when the controller starts; 0 keeps the
	// bulkhead's own limit (brought within MinLimit and MaxLimit).
	InitialLimit int `yaml:"initialLimit" json:"initialLimit"`
	// Window is the shortest time over which finished calls are aggregated
	// before the algorithm decides; 0 means 100ms, and at most 24h. A window
	// also lasts at least twice the latest mean run time, and until it holds
	// MinSamples.
	Window time.Duration `yaml:"window" json:"window"`
	// MinSamples is how many finished calls a window needs; 0 means 20.
	MinSamples int `yaml:"minSamples" json:"minSamples"`

	// The parameters of each algorithm; only the chosen one is read.
	Vegas     Vegas     `yaml:"vegas" json:"vegas"`
	Gradient2 Gradient2 `yaml:"gradient2" json:"gradient2"`
	AIMD      AIMD      `yaml:"aimd" json:"aimd"`

	// Shadow, if true, makes the controller a dry run: it computes the
	// limit and publishes it in State (and so in the metrics) but never
	// applies it; the bulkhead keeps the limit it has. The algorithm judges
	// each window as if its own limit were in force, while the calls ran
	// under the bulkhead's, so a shadow limit is what the controller would
	// choose from this traffic, not what it would converge to in charge.
	Shadow bool `yaml:"shadow" json:"shadow"`

	// Custom, if set, is used instead of the named algorithm. A controller
	// calls it from one goroutine at a time; give each controller its own.
	Custom Algorithm `yaml:"-" json:"-"`
}

// Vegas holds the parameters of the Vegas algorithm (after TCP Vegas and
// Netflix's VegasLimit): it estimates the calls queued at the dependency as
// inFlight × (1 − noLoad/latency) and keeps that queue between Alpha and
// Beta.
type Vegas struct {
	// Alpha and Beta are the queue sizes below which the limit grows and
	// above which it shrinks; 0 means 3·log10(limit) and 6·log10(limit)
	// (with log10 at least 1, so at least 3 and 6; Beta at least Alpha+2).
	Alpha float64 `yaml:"alpha" json:"alpha"`
	Beta  float64 `yaml:"beta" json:"beta"`
	// NoLoadWindow is how long a no-load latency estimate is trusted
	// before it is probed again, by lowering the limit 15% at a time
	// until latency stops falling; 0 means 30s. A lower window mean
	// replaces the estimate at once.
	NoLoadWindow time.Duration `yaml:"noLoadWindow" json:"noLoadWindow"`
	// Backoff multiplies the limit after a window with drops; 0 means 0.9.
	Backoff float64 `yaml:"backoff" json:"backoff"`
}

// Gradient2 holds the parameters of the Gradient2 algorithm (after Netflix's
// Gradient2Limit): it compares the window's mean latency with a long-term
// average and scales the limit by their ratio.
type Gradient2 struct {
	// Smoothing is the weight of a new estimate against the current limit;
	// 0 means 0.2.
	Smoothing float64 `yaml:"smoothing" json:"smoothing"`
	// Headroom is how many calls the limit may grow by in a window while
	// latency holds; 0 means sqrt(limit), at least 1.
	Headroom float64 `yaml:"headroom" json:"headroom"`
	// LongWindow is how many windows the long-term average spans; 0 means 100.
	LongWindow int `yaml:"longWindow" json:"longWindow"`
	// Tolerance is how much slower than the long-term average a window may
	// be before the limit shrinks; 0 means 1 (any slowdown shrinks it).
	Tolerance float64 `yaml:"tolerance" json:"tolerance"`
	// Backoff multiplies the limit after a window with drops; 0 means 0.9.
	Backoff float64 `yaml:"backoff" json:"backoff"`
}

// AIMD holds the parameters of additive increase, multiplicative decrease:
// the limit grows by Increase after a window without drops in which the limit
// was used, and is multiplied by Backoff after a window with drops.
type AIMD struct {
	// Increase is added to the limit per window; 0 means 1.
	Increase float64 `yaml:"increase" json:"increase"`
	// Backoff multiplies the limit after a window with drops; 0 means 0.9.
	Backoff float64 `yaml:"backoff" json:"backoff"`
	// SlowCall, if positive, makes a window whose mean latency exceeds it
	// count as one with drops; 0 means no latency threshold.
	SlowCall time.Duration `yaml:"slowCall" json:"slowCall"`
}

// DefaultConfig returns the defaults: Vegas between 1 and 200, starting at
// the bulkhead's own limit, deciding every 100ms or 20 calls, and each
// algorithm's parameters as their comments give them (those that depend on
// the limit stay 0).
func DefaultConfig() Config {
	return Config{
		Algorithm: "vegas", MinLimit: 1, MaxLimit: 200, Window: 100 * time.Millisecond, MinSamples: 20,
		Vegas:     Vegas{NoLoadWindow: 30 * time.Second, Backoff: 0.9},
		Gradient2: Gradient2{Smoothing: 0.2, LongWindow: 100, Tolerance: 1, Backoff: 0.9},
		AIMD:      AIMD{Increase: 1, Backoff: 0.9},
	}
}

// Validate reports the first invalid field of c, naming the field and value.
func (c Config) Validate() error {
	switch c.Algorithm {
	case "", "vegas", "gradient2", "aimd":
	default:
		if c.Custom == nil {
			return fmt.Errorf("algorithm must be vegas, gradient2 or aimd, got %q", c.Algorithm)
		}
	}
	switch {
	case c.MinLimit < 0 || c.MinLimit > maxLimit:
		return fmt.Errorf("minLimit must be between 1 and %d (or 0 for 1), got %d", maxLimit, c.MinLimit)
	case c.MaxLimit < 0 || c.MaxLimit > maxLimit:
		return fmt.Errorf("maxLimit must be between 1 and %d (or 0 for 200), got %d", maxLimit, c.MaxLimit)
	case c.InitialLimit < 0:
		return fmt.Errorf("initialLimit must be >= 0, got %d", c.InitialLimit)
	case c.Window < 0 || c.Window > maxWindow:
		return fmt.Errorf("window must be between 0 and %v, got %v", maxWindow, c.Window)
	case c.MinSamples < 0:
		return fmt.Errorf("minSamples must be >= 0, got %d", c.MinSamples)
	}
	d := c.withDefaults()
	switch {
	case d.MinLimit > d.MaxLimit:
		return fmt.Errorf("minLimit (%d) must be <= maxLimit (%d)", d.MinLimit, d.MaxLimit)
	case c.InitialLimit != 0 && (c.InitialLimit < d.MinLimit || c.InitialLimit > d.MaxLimit):
		return fmt.Errorf("initialLimit must be between minLimit (%d) and maxLimit (%d), got %d",
			d.MinLimit, d.MaxLimit, c.InitialLimit)
	}
	v, g, a := c.Vegas, c.Gradient2, c.AIMD
	for _, f := range []struct {
		name string
		v    float64
	}{{"vegas.alpha", v.Alpha}, {"vegas.beta", v.Beta}, {"vegas.backoff", v.Backoff},
		{"gradient2.smoothing", g.Smoothing}, {"gradient2.headroom", g.Headroom},
		{"gradient2.tolerance", g.Tolerance}, {"gradient2.backoff", g.Backoff},
		{"aimd.increase", a.Increase}, {"aimd.backoff", a.Backoff}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s must be a finite number, got %v", f.name, f.v)
		}
	}
	if err := checkFactor("vegas.backoff", c.Vegas.Backoff); err != nil {
		return err
	}
	if err := checkFactor("gradient2.backoff", c.Gradient2.Backoff); err != nil {
		return err
	}
	if err := checkFactor("aimd.backoff", c.AIMD.Backoff); err != nil {
		return err
	}
	switch {
	case v.Alpha < 0:
		return fmt.Errorf("vegas.alpha must be >= 0, got %v", v.Alpha)
	case v.Beta < 0:
		return fmt.Errorf("vegas.beta must be >= 0, got %v", v.Beta)
	case v.Alpha > 0 && v.Beta > 0 && v.Beta < v.Alpha:
		return fmt.Errorf("vegas.beta (%v) must be >= vegas.alpha (%v)", v.Beta, v.Alpha)
	case v.NoLoadWindow < 0:
		return fmt.Errorf("vegas.noLoadWindow must be >= 0, got %v", v.NoLoadWindow)
	case g.Smoothing < 0 || g.Smoothing > 1:
		return fmt.Errorf("gradient2.smoothing must be between 0 and 1, got %v", g.Smoothing)
	case g.Headroom < 0:
		return fmt.Errorf("gradient2.headroom must be >= 0, got %v", g.Headroom)
	case g.LongWindow < 0:
		return fmt.Errorf("gradient2.longWindow must be >= 0, got %d", g.LongWindow)
	case g.Tolerance != 0 && g.Tolerance < 1:
		return fmt.Errorf("gradient2.tolerance must be >= 1, got %v", g.Tolerance)
	case a.Increase < 0:
		return fmt.Errorf("aimd.increase must be >= 0, got %v", a.Increase)
	case a.SlowCall < 0:
		return fmt.Errorf("aimd.slowCall must be >= 0, got %v", a.SlowCall)
	}
	return nil
}

// checkFactor checks a backoff: 0 (the default) or in [0.5, 1).
func checkFactor(name string, v float64) error {
	if v != 0 && (v < 0.5 || v >= 1) {
		return fmt.Errorf("%s must be >= 0.5 and < 1, got %v", name, v)
	}
	return nil
}

// withDefaults returns c with every zero field replaced by DefaultConfig's.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Algorithm = cmp.Or(c.Algorithm, d.Algorithm)
	c.MinLimit = cmp.Or(c.MinLimit, d.MinLimit)
	c.MaxLimit = cmp.Or(c.MaxLimit, max(d.MaxLimit, c.MinLimit))
	c.Window = cmp.Or(c.Window, d.Window)
	c.MinSamples = cmp.Or(c.MinSamples, d.MinSamples)
	v, g, a := &c.Vegas, &c.Gradient2, &c.AIMD
	v.NoLoadWindow = cmp.Or(v.NoLoadWindow, d.Vegas.NoLoadWindow)
	v.Backoff = cmp.Or(v.Backoff, d.Vegas.Backoff)
	g.Smoothing = cmp.Or(g.Smoothing, d.Gradient2.Smoothing)
	g.LongWindow = cmp.Or(g.LongWindow, d.Gradient2.LongWindow)
	g.Tolerance = cmp.Or(g.Tolerance, d.Gradient2.Tolerance)
	g.Backoff = cmp.Or(g.Backoff, d.Gradient2.Backoff)
	a.Increase = cmp.Or(a.Increase, d.AIMD.Increase)
	a.Backoff = cmp.Or(a.Backoff, d.AIMD.Backoff)
	return c
}

// algorithm builds the configured algorithm. c has its defaults.
func (c Config) algorithm() Algorithm {
	if c.Custom != nil {
		return c.Custom
	}
	switch c.Algorithm {
	case "gradient2":
		return &gradient2{p: c.Gradient2}
	case "aimd":
		return &aimd{p: c.AIMD}
	}
	return &vegas{p: c.Vegas}
}
