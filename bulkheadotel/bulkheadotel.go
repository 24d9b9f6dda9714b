// Package bulkheadotel reports bulkheads' state and counters as
// OpenTelemetry metrics, through the go.opentelemetry.io/otel/metric API: the
// same information as the registry's Prometheus collector, under names that
// follow OpenTelemetry's naming guidelines (modelled on ASP.NET Core's
// aspnetcore.rate_limiting.* instruments).
//
// [Register] reads every bulkhead's Stats (and a keyed bulkhead's
// KeyStats, a shadowed one's ShadowStats) when the SDK collects, so it
// costs nothing per call, and a bulkhead removed from its [Source] stops
// being reported at the next collection. The optional histograms are fed by
// the bulkheads' events. docs/metrics.md lists every instrument beside its
// Prometheus name.
package bulkheadotel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/bulkhead-go/bulkhead"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope (the meter's name) of the
// instruments that [Register] creates.
const ScopeName = "github.com/bulkhead-go/bulkhead/bulkheadotel"

// Source is where [Register] finds the bulkheads to report: a
// *registry.Registry, or [Bulkheads] for bulkheads that are not in one.
// Instances is called at every collection; Subscribe only with
// Options.Histograms.
type Source interface {
	Instances() []bulkhead.Instance
	Subscribe(fn func(bulkhead.Event)) (cancel func())
}

// Observable is a bulkhead that [Bulkheads] can report:
// *semaphore.Bulkhead and *pool.Bulkhead both are.
type Observable interface {
	bulkhead.Instance
	Subscribe(fn func(bulkhead.Event)) (cancel func())
}

// Bulkheads returns a [Source] over a fixed list of bulkheads.
func Bulkheads(bs ...Observable) Source { return fixed(bs) }

type fixed []Observable

func (f fixed) Instances() []bulkhead.Instance {
	is := make([]bulkhead.Instance, len(f))
	for i, b := range f {
		is[i] = b
	}
	return is
}

func (f fixed) Subscribe(fn func(bulkhead.Event)) (cancel func()) {
	cancels := make([]func(), len(f))
	for i, b := range f {
		cancels[i] = b.Subscribe(fn)
	}
	return func() {
		for _, c := range cancels {
			c()
		}
	}
}

// Options chooses what [Register] reports. The zero value reports the
// up-down counters and counters, without histograms.
type Options struct {
	// Histograms adds bulkhead.call.time_in_queue and
	// bulkhead.call.duration, fed by the bulkheads' events. Off by
	// default: with it on, every call builds an event and reads the clock.
	Histograms bool
	// Buckets are the histograms' bucket boundaries in seconds; nil means
	// OpenTelemetry's advice for request durations (5 ms to 10 s).
	Buckets []float64
	// Attributes are added to every point this registration reports, as
	// prometheus.WrapRegistererWith adds labels. Two sources registered
	// on one MeterProvider need attributes that tell them apart (for
	// example attribute.String("registry", "orders")): otherwise their
	// bulkheads of one kind and name are reported as one series, whose
	// values the SDK adds up. Keys must be non-empty, distinct and not one
	// of the bulkhead.* keys of the instruments.
	Attributes []attribute.KeyValue
}

// defaultBuckets are the boundaries the OpenTelemetry semantic conventions
// advise for durations in seconds (http.server.request.duration).
var defaultBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// Attribute keys of every instrument.
const (
	attrName   = "bulkhead.name"   // the bulkhead's name
	attrKind   = "bulkhead.kind"   // "semaphore" or "pool"
	attrResult = "bulkhead.result" // "permitted", "rejected" or "cancelled"
	attrReason = "bulkhead.reason" // a bulkhead.Reason's String: "full", "timeout", "waiters", ...
)

// reasonOpts are one bulkhead's attribute options for bulkhead.rejections,
// by Reason.
type reasonOpts [len(bulkhead.Reasons) + 1]metric.MeasurementOption

func newReasonOpts(k key, extra []attribute.KeyValue) *reasonOpts {
	opts := new(reasonOpts)
	kv := append(slices.Clip(extra), attribute.String(attrName, k.name), attribute.String(attrKind, k.kind.String()))
	for _, r := range bulkhead.Reasons {
		opts[r] = metric.WithAttributeSet(attribute.NewSet(append(slices.Clip(kv), attribute.String(attrReason, r.String()))...))
	}
	return opts
}

type gauge struct {
	inst metric.Int64ObservableUpDownCounter
	val  func(s bulkhead.Stats) int
}

type counter struct {
	inst   metric.Int64ObservableCounter
	val    func(s bulkhead.Stats) uint64
	result result // or none
}

type key struct {
	kind bulkhead.Kind
	name string
}

// result is the value of the bulkhead.result attribute.
type result int

const (
	none result = iota
	permitted
	rejected
	cancelled
	nResults
)

var resultNames = [nResults]string{"", "permitted", "rejected", "cancelled"}

// attrCache holds the attribute options of each bulkhead, built once: the
// callback keeps those of the bulkheads it reports, and the histograms add
// those of the bulkheads whose events they see.
type attrCache struct {
	mu    sync.Mutex
	m     map[key]*[nResults]metric.MeasurementOption
	extra []attribute.KeyValue // Options.Attributes
}

// get returns k's options; call it with c.mu held.
func (c *attrCache) get(k key) *[nResults]metric.MeasurementOption {
	if opts, ok := c.m[k]; ok {
		return opts
	}
	opts := new([nResults]metric.MeasurementOption)
	kv := append(slices.Clip(c.extra), attribute.String(attrName, k.name), attribute.String(attrKind, k.kind.String()))
	opts[none] = metric.WithAttributeSet(attribute.NewSet(kv...))
	for r := permitted; r < nResults; r++ {
		opts[r] = metric.WithAttributeSet(attribute.NewSet(append(slices.Clip(kv), attribute.String(attrResult, resultNames[r]))...))
	}
	c.m[k] = opts
	return opts
}

// Register creates the instruments on a meter of mp named [ScopeName] and
// reports src's bulkheads through them until unregister is called, which
// stops the reporting and the histograms' subscription. It fails only if
// the meter refuses an instrument or the callback.
func Register(mp metric.MeterProvider, src Source, opts Options) (unregister func() error, err error) {
	if mp == nil || src == nil {
		return nil, errors.New("bulkheadotel: Register needs a MeterProvider and a Source, got nil")
	}
	seen := map[attribute.Key]string{attrName: "an instrument's own", attrKind: "an instrument's own", attrResult: "an instrument's own",
		attrReason: "an instrument's own"}
	for i, kv := range opts.Attributes {
		why := seen[kv.Key]
		if !kv.Valid() {
			why = "empty"
		}
		if why != "" {
			return nil, fmt.Errorf("bulkheadotel: Options.Attributes[%d]: key %q is %s", i, kv.Key, why)
		}
		seen[kv.Key] = "repeated"
	}
	m := mp.Meter(ScopeName)
	var errs []error
	updown := func(name, desc string, val func(s bulkhead.Stats) int) gauge {
		inst, err := m.Int64ObservableUpDownCounter(name, metric.WithDescription(desc), metric.WithUnit("{call}"))
		errs = append(errs, err)
		return gauge{inst, val}
	}
	count := func(name, desc string, val func(s bulkhead.Stats) uint64) counter {
		inst, err := m.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit("{call}"))
		errs = append(errs, err)
		return counter{inst: inst, val: val}
	}
	gauges := []gauge{
		updown("bulkhead.limit", "The limit in force: permits (semaphore) or workers (pool).",
			func(s bulkhead.Stats) int { return s.MaxConcurrentCalls }),
		updown("bulkhead.available_calls", "Calls that may start now: the limit minus the calls running, never below 0.",
			func(s bulkhead.Stats) int { return s.AvailableConcurrentCalls }),
		updown("bulkhead.active_calls", "Calls running now (pool: tasks on a worker).",
			func(s bulkhead.Stats) int { return s.InFlight }),
		updown("bulkhead.waiting_calls", "Callers waiting: for a permit (semaphore) or for room in the queue (pool Go callers).",
			func(s bulkhead.Stats) int { return s.Waiting }),
		updown("bulkhead.queued_calls", "Tasks waiting in the queue for a worker (pool).",
			func(s bulkhead.Stats) int { return s.QueueDepth }),
		updown("bulkhead.queue.limit", "The queue's capacity (pool); 0 for a semaphore.",
			func(s bulkhead.Stats) int { return s.QueueCapacity }),
	}
	calls := count("bulkhead.calls", "Calls that asked for a permit or a worker, by result: "+
		"permitted, rejected (the bulkhead was full) or cancelled (gave up while waiting).", nil)
	counters := []counter{
		{inst: calls.inst, val: func(s bulkhead.Stats) uint64 { return s.Permitted }, result: permitted},
		{inst: calls.inst, val: func(s bulkhead.Stats) uint64 { return s.Rejected }, result: rejected},
		{inst: calls.inst, val: func(s bulkhead.Stats) uint64 { return s.Cancelled }, result: cancelled},
		count("bulkhead.finished_calls", "Permitted calls that completed, whatever their outcome.",
			func(s bulkhead.Stats) uint64 { return s.Finished }),
		count("bulkhead.failed_calls", "Finished calls that returned an error, panicked or called runtime.Goexit.",
			func(s bulkhead.Stats) uint64 { return s.Failed }),
	}
	rejections := count("bulkhead.rejections", "Calls refused, by reason (bulkhead.reason: full, timeout, waiters, "+
		"deadline, codel, key, total, keys, priority, displaced); they add up to bulkhead.calls rejected.", nil)
	state := func(name, desc string) metric.Int64ObservableGauge {
		inst, err := m.Int64ObservableGauge(name, metric.WithDescription(desc), metric.WithUnit("1"))
		errs = append(errs, err)
		return inst
	}
	overloaded := state("bulkhead.codel.overloaded", "1 while CoDel finds the line of waiters overloaded, else 0.")
	lifo := state("bulkhead.queue.lifo", "1 while the line of waiters serves the newest first, else 0.")
	// A keyed bulkhead's KeyStats: counts of keys, never a key.
	keysUpdown := func(name, desc string) metric.Int64ObservableUpDownCounter {
		inst, err := m.Int64ObservableUpDownCounter(name, metric.WithDescription(desc), metric.WithUnit("{key}"))
		errs = append(errs, err)
		return inst
	}
	activeKeys := keysUpdown("bulkhead.active_keys", "Keys of a keyed bulkhead that hold or wait for capacity now.")
	idleKeys := keysUpdown("bulkhead.idle_keys", "Entries of idle keys a keyed bulkhead keeps for reuse.")
	evictedKeys, err := m.Int64ObservableCounter("bulkhead.evicted_keys",
		metric.WithDescription("Entries of idle keys a keyed bulkhead removed from its cache."), metric.WithUnit("{key}"))
	errs = append(errs, err)
	// A shadowed or observe-only bulkhead's ShadowStats.
	shadowLimit := updown("bulkhead.shadow.limit", "The shadow's limit, evaluated and never enforced (observe-only: the configured limit).", nil).inst
	shadowActive := updown("bulkhead.shadow.active_calls", "Shadow permits (a pool's: shadow workers) held now: calls the shadow would have let run that are still running.", nil).inst
	shadowQueued := updown("bulkhead.shadow.queued_calls", "A pool's shadow queue slots held now: tasks the shadow would have kept queued.", nil).inst
	shadowQueueLimit := updown("bulkhead.shadow.queue.limit", "A pool's shadow queue capacity.", nil).inst
	shadowObserve := state("bulkhead.shadow.observe", "1 for a bulkhead that enforces nothing and evaluates its own limit as a shadow, else 0.")
	wouldReject := count("bulkhead.shadow.would_reject", "Calls that found the shadow full and would have been refused at once (a shadow without waiting).", nil).inst
	wouldWait := count("bulkhead.shadow.would_wait", "Calls that found the shadow full and would have had to wait for it.", nil).inst
	wouldTimeOut := count("bulkhead.shadow.would_time_out", "Calls that waited for their permit longer than the shadow's maximum wait.", nil).inst
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	insts := make([]metric.Observable, 0, len(gauges)+len(counters)+20)
	for _, g := range gauges {
		insts = append(insts, g.inst)
	}
	insts = append(insts, calls.inst, counters[3].inst, counters[4].inst, rejections.inst, overloaded, lifo,
		activeKeys, idleKeys, evictedKeys, shadowLimit, shadowActive, shadowQueued, shadowQueueLimit, shadowObserve, wouldReject, wouldWait, wouldTimeOut)
	var reasonsMu sync.Mutex // two readers may collect at once
	reasons := map[key]*reasonOpts{}

	cache := &attrCache{m: map[key]*[nResults]metric.MeasurementOption{}, extra: slices.Clone(opts.Attributes)}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		is := src.Instances()
		stats := make([]bulkhead.Stats, len(is))
		keys := make([]*bulkhead.KeyStats, len(is))       // nil: not keyed
		shadows := make([]*bulkhead.ShadowStats, len(is)) // nil: no shadow
		for i, in := range is {
			stats[i] = in.Stats()
			stats[i].Name = in.Name()
			if k, ok := in.(bulkhead.KeyedInstance); ok {
				ks := k.KeyStats()
				keys[i] = &ks
				// A keyed bulkhead counts these reasons in KeyStats, not in Stats.
				by := &stats[i].RejectedBy
				by[bulkhead.ReasonKey], by[bulkhead.ReasonTotal], by[bulkhead.ReasonKeys] = ks.RejectedKey, ks.RejectedTotal, ks.RejectedKeys
			}
			if sh, ok := in.(shadowed); ok {
				if ss, ok := sh.ShadowStats(); ok {
					shadows[i] = &ss
				}
			}
		}
		// The histograms take the cache's lock on every event: hold it
		// only to look the attributes up, not while reading Stats.
		opts := make([]*[nResults]metric.MeasurementOption, len(is))
		cache.mu.Lock()
		live := make(map[key]*[nResults]metric.MeasurementOption, len(is))
		for i, s := range stats {
			k := key{s.Kind, s.Name}
			opts[i] = cache.get(k)
			live[k] = opts[i]
		}
		cache.m = live // forget removed bulkheads
		cache.mu.Unlock()
		ros := make([]*reasonOpts, len(stats))
		reasonsMu.Lock()
		live2 := make(map[key]*reasonOpts, len(is))
		for i, s := range stats {
			k := key{s.Kind, s.Name}
			if ros[i] = reasons[k]; ros[i] == nil {
				ros[i] = newReasonOpts(k, cache.extra)
			}
			live2[k] = ros[i]
		}
		reasons = live2 // forget removed bulkheads
		reasonsMu.Unlock()
		for i, s := range stats {
			for _, r := range bulkhead.Reasons {
				o.ObserveInt64(rejections.inst, int64(s.RejectedBy[r]), ros[i][r])
			}
			o.ObserveInt64(overloaded, int64(one(s.Overloaded)), opts[i][none])
			o.ObserveInt64(lifo, int64(one(s.LIFO)), opts[i][none])
			for _, g := range gauges {
				o.ObserveInt64(g.inst, int64(g.val(s)), opts[i][none])
			}
			for _, c := range counters {
				o.ObserveInt64(c.inst, int64(c.val(s)), opts[i][c.result])
			}
			if ks := keys[i]; ks != nil {
				o.ObserveInt64(activeKeys, int64(ks.ActiveKeys), opts[i][none])
				o.ObserveInt64(idleKeys, int64(ks.IdleKeys), opts[i][none])
				o.ObserveInt64(evictedKeys, int64(ks.Evicted), opts[i][none])
			}
			if ss := shadows[i]; ss != nil {
				o.ObserveInt64(shadowLimit, int64(ss.Limit), opts[i][none])
				o.ObserveInt64(shadowActive, int64(ss.InUse), opts[i][none])
				o.ObserveInt64(shadowObserve, int64(one(ss.Observe)), opts[i][none])
				o.ObserveInt64(wouldReject, int64(ss.WouldReject), opts[i][none])
				o.ObserveInt64(wouldWait, int64(ss.WouldWait), opts[i][none])
				o.ObserveInt64(wouldTimeOut, int64(ss.WouldTimeOut), opts[i][none])
				if s.Kind == bulkhead.Pool {
					o.ObserveInt64(shadowQueued, int64(ss.QueueDepth), opts[i][none])
					o.ObserveInt64(shadowQueueLimit, int64(ss.QueueCapacity), opts[i][none])
				}
			}
		}
		return nil
	}, insts...)
	if err != nil {
		return nil, err
	}
	stop := func() {}
	if opts.Histograms {
		h, err := newHistograms(m, opts.Buckets, cache)
		if err != nil {
			reg.Unregister()
			return nil, err
		}
		stop = src.Subscribe(h.observe)
	}
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() {
			stop()
			err = reg.Unregister()
		})
		return err
	}, nil
}

// shadowed is a bulkhead with a shadow limit or observe mode (a semaphore,
// or a pool with a shadow)
// (*semaphore.Bulkhead), as the registry's collector finds it.
type shadowed interface {
	ShadowStats() (bulkhead.ShadowStats, bool)
}

// one is 1 for true and 0 for false.
func one(b bool) int {
	if b {
		return 1
	}
	return 0
}
