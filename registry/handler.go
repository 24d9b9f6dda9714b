package registry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// The status document: its JSON names are part of the API (docs/metrics.md).
type status struct {
	Instances []instanceStatus `json:"instances"`
	Reload    *reloads         `json:"reload,omitempty"`
}

type instanceStatus struct {
	Name     string                `json:"name"`
	Kind     string                `json:"kind"`
	Config   statusConfig          `json:"config"`
	Stats    statusStats           `json:"stats"`
	Events   []statusEvent         `json:"events"`
	Adaptive *adaptive.State       `json:"adaptive,omitempty"`
	Keys     *bulkhead.KeyStats    `json:"keys,omitempty"`
	Shadow   *bulkhead.ShadowStats `json:"shadow,omitempty"`
}

type statusConfig struct {
	MaxConcurrentCalls int    `json:"maxConcurrentCalls,omitempty"`
	PerKey             int    `json:"maxConcurrentCallsPerKey,omitempty"`
	MaxActiveKeys      int    `json:"maxActiveKeys,omitempty"`
	MaxWaitDuration    string `json:"maxWaitDuration,omitempty"`
	MaxWorkers         int    `json:"maxWorkers,omitempty"`
	QueueCapacity      *int   `json:"queueCapacity,omitempty"`
	MaxRunningPerKey   int    `json:"maxRunningPerKey,omitempty"`
	QueueCapPerKey     int    `json:"queueCapacityPerKey,omitempty"`
	QueueTimeout       string `json:"queueTimeout,omitempty"`
	KeepAlive          string `json:"keepAlive,omitempty"`
	// The line's shedding rules, where set (docs/shedding.md).
	MaxWaitingCalls  int          `json:"maxWaitingCalls,omitempty"`
	MinDeadlineSlack string       `json:"minDeadlineSlack,omitempty"`
	QueueOrder       string       `json:"queueOrder,omitempty"` // lifo or adaptiveLifo; fifo is not shown
	LIFOThreshold    int          `json:"lifoThreshold,omitempty"`
	CoDel            *statusCoDel `json:"codel,omitempty"`
}

type statusCoDel struct {
	TargetDelay string `json:"targetDelay"`
	Interval    string `json:"interval"`
}

func (sc statusConfig) withLine(maxWaiting int, slack time.Duration, order bulkhead.QueueOrder, threshold int, cd *bulkhead.CoDel) statusConfig {
	sc.MaxWaitingCalls, sc.MinDeadlineSlack, sc.LIFOThreshold = maxWaiting, durText(slack), threshold
	if order != bulkhead.FIFO {
		sc.QueueOrder = order.String()
	}
	if cd != nil {
		d := cd.WithDefaults()
		sc.CoDel = &statusCoDel{TargetDelay: d.Target.String(), Interval: d.Interval.String()}
	}
	return sc
}

// statusStats is a bulkhead's Stats, with RejectedBy listing the reasons seen.
type statusStats struct {
	bulkhead.Stats
	RejectedBy map[string]uint64 `json:"rejectedBy,omitempty"`
}

type statusEvent struct {
	Type    string    `json:"type"`
	Time    time.Time `json:"time"`
	Outcome string    `json:"outcome,omitempty"`
	Wait    string    `json:"wait,omitempty"`
	Run     string    `json:"run,omitempty"`
}

// outcome is the fixed word for an event's outcome (docs/metrics.md), never
// an error's text.
func outcome(e *bulkhead.Event) string {
	switch e.Type {
	case bulkhead.EventRejected:
		return "rejected"
	case bulkhead.EventCancelled:
		switch {
		case errors.Is(e.Err, context.Canceled):
			return "cancelled"
		case errors.Is(e.Err, context.DeadlineExceeded):
			return "deadline-exceeded"
		case errors.Is(e.Err, bulkhead.ErrClosed):
			return "closed"
		}
		return "other"
	case bulkhead.EventFinished:
		if e.Err == nil {
			return "success"
		}
		if _, ok := errors.AsType[*bulkhead.PanicError](e.Err); ok {
			return "panic"
		}
		return "error"
	}
	return ""
}

func configOf(b handle) statusConfig {
	switch b := b.(type) {
	case *semaphore.Bulkhead:
		c := b.Config()
		return statusConfig{MaxConcurrentCalls: c.MaxConcurrentCalls, MaxWaitDuration: c.MaxWaitDuration.String()}.
			withLine(c.MaxWaitingCalls, c.MinDeadlineSlack, c.QueueOrder, c.LIFOThreshold, c.CoDel)
	case *semaphore.Keyed[string]:
		c := b.Config()
		return statusConfig{MaxConcurrentCalls: c.MaxConcurrentCalls, PerKey: c.PerKey.MaxConcurrentCalls, MaxActiveKeys: c.MaxActiveKeys,
			MaxWaitDuration: c.PerKey.MaxWaitDuration.String()}
	case *pool.Bulkhead:
		return poolStatus(b.Config(), 0, 0)
	case *pool.Keyed[string]:
		c := b.Config()
		return poolStatus(c.Config, c.MaxRunningPerKey, c.QueueCapacityPerKey)
	}
	return statusConfig{}
}

func poolStatus(c pool.Config, runningPerKey, queuePerKey int) statusConfig {
	return statusConfig{MaxWorkers: c.MaxWorkers, QueueCapacity: &c.QueueCapacity, MaxRunningPerKey: runningPerKey, QueueCapPerKey: queuePerKey,
		QueueTimeout: c.QueueTimeout.String(), KeepAlive: c.KeepAlive.String()}.
		withLine(c.MaxWaitingCalls, c.MinDeadlineSlack, c.QueueOrder, c.LIFOThreshold, c.CoDel)
}

func durText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func statusOf(e *entry) instanceStatus {
	s := e.b.Stats()
	is := instanceStatus{
		Name:   e.name,
		Kind:   e.kind.String(),
		Stats:  statusStats{Stats: s, RejectedBy: map[string]uint64{}},
		Config: configOf(e.b),
		Events: []statusEvent{},
	}
	for _, r := range bulkhead.Reasons {
		if n := s.RejectedBy[r]; n > 0 {
			is.Stats.RejectedBy[r.String()] = n
		}
	}
	if ctl := e.control(); ctl != nil {
		is.Adaptive = new(ctl.c.State())
	}
	if ss, ok := shadowOf(e.b); ok {
		is.Shadow = &ss
	}
	if k, ok := e.b.(bulkhead.KeyedInstance); ok {
		is.Keys = new(k.KeyStats())
	}
	if rg := e.ring.Load(); rg != nil {
		for _, rec := range rg.records() {
			is.Events = append(is.Events, statusEvent{
				Type: rec.typ.String(), Time: rec.at.UTC(), Outcome: rec.outcome,
				Wait: durText(rec.wait), Run: durText(rec.run),
			})
		}
	}
	return is
}

// Handler returns an http.Handler that serves as JSON every bulkhead's
// configuration, statistics, controller state and recent events (with
// Config.RecordEvents), and what Follow did; ?name=x (and ?kind=semaphore or
// pool) picks bulkheads. It never shows an error's text but Follow's last.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := req.URL.Query()
		var es []*entry
		if name := q.Get("name"); name != "" {
			r.mu.Lock()
			for _, k := range kinds {
				if e, ok := r.entries[key{k, name}]; ok && (q.Get("kind") == "" || q.Get("kind") == k.String()) {
					es = append(es, e)
				}
			}
			r.mu.Unlock()
			if es == nil {
				http.Error(w, "no such bulkhead", http.StatusNotFound)
				return
			}
		} else {
			es = r.snapshot()
		}
		st := status{Instances: make([]instanceStatus, 0, len(es)), Reload: r.reloadStatus()}
		for _, e := range es {
			st.Instances = append(st.Instances, statusOf(e))
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	})
}
