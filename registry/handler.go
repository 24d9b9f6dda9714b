package registry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// record is what the status page keeps of an event: its type, time,
// durations and outcome word, never its error, so that an error's text (or
// a panic's stack) can neither be shown nor kept alive by the ring, and
// every record has the same small size.
type record struct {
	typ       bulkhead.EventType
	outcome   string // a constant from outcome
	time      time.Time
	wait, run time.Duration
}

func recordOf(e bulkhead.Event) record {
	return record{typ: e.Type, outcome: outcome(e), time: e.Time, wait: e.Wait, run: e.Run}
}

// ring keeps the last len(buf) records.
type ring struct {
	mu   sync.Mutex
	buf  []record
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]record, n)} }

// add keeps the status form of e.
func (r *ring) add(e bulkhead.Event) { r.put(recordOf(e)) }

func (r *ring) put(rec record) {
	r.mu.Lock()
	r.buf[r.next] = rec
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
	r.mu.Unlock()
}

// records returns the kept records, oldest first.
func (r *ring) records() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]record(nil), r.buf[:r.next]...)
	}
	out := make([]record, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// Status is the document [Registry.Handler] serves.
type Status struct {
	Instances []InstanceStatus `json:"instances"`
}

// InstanceStatus is one bulkhead's configuration, statistics and recent
// events.
type InstanceStatus struct {
	Name   string        `json:"name"`
	Kind   string        `json:"kind"`
	Config StatusConfig  `json:"config"`
	Stats  StatusStats   `json:"stats"`
	Events []StatusEvent `json:"events"`
}

// StatusConfig is a bulkhead's configuration in force. Durations are in Go
// syntax ("500ms"). Semaphores fill in MaxConcurrentCalls and
// MaxWaitDuration; pools fill in MaxWorkers, QueueCapacity, MaxWaitDuration
// and KeepAlive.
type StatusConfig struct {
	MaxConcurrentCalls int    `json:"maxConcurrentCalls,omitempty"`
	MaxWorkers         int    `json:"maxWorkers,omitempty"`
	QueueCapacity      *int   `json:"queueCapacity,omitempty"`
	MaxWaitDuration    string `json:"maxWaitDuration"`
	KeepAlive          string `json:"keepAlive,omitempty"`
}

// StatusStats is [bulkhead.Stats] with JSON names.
type StatusStats struct {
	MaxConcurrentCalls       int    `json:"maxConcurrentCalls"`
	AvailableConcurrentCalls int    `json:"availableConcurrentCalls"`
	InFlight                 int    `json:"inFlight"`
	Waiting                  int    `json:"waiting"`
	QueueDepth               int    `json:"queueDepth"`
	QueueCapacity            int    `json:"queueCapacity"`
	Permitted                uint64 `json:"permitted"`
	Rejected                 uint64 `json:"rejected"`
	Cancelled                uint64 `json:"cancelled"`
	Finished                 uint64 `json:"finished"`
	Failed                   uint64 `json:"failed"`
}

// StatusEvent is one recorded event. Outcome is a fixed word, never an
// error's text: "full" (rejected), "canceled", "deadline-exceeded",
// "closed" or "other" (cancelled), "success", "error" or "panic"
// (finished), "" (permitted).
type StatusEvent struct {
	Type    string    `json:"type"`
	Time    time.Time `json:"time"`
	Outcome string    `json:"outcome,omitempty"`
	Wait    string    `json:"wait,omitempty"`
	Run     string    `json:"run,omitempty"`
}

func outcome(e bulkhead.Event) string {
	switch e.Type {
	case bulkhead.EventRejected:
		return "full"
	case bulkhead.EventCancelled:
		switch {
		case errors.Is(e.Err, context.Canceled):
			return "canceled"
		case errors.Is(e.Err, context.DeadlineExceeded):
			return "deadline-exceeded"
		case errors.Is(e.Err, bulkhead.ErrClosed):
			return "closed"
		}
		return "other"
	case bulkhead.EventFinished:
		var pe *bulkhead.PanicError
		switch {
		case e.Err == nil:
			return "success"
		case errors.As(e.Err, &pe):
			return "panic"
		}
		return "error"
	}
	return ""
}

func durText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// Status returns what [Registry.Handler] serves: every bulkhead's
// configuration, statistics and recent events, sorted by name.
func (r *Registry) Status() Status {
	es := r.snapshot()
	st := Status{Instances: make([]InstanceStatus, 0, len(es))}
	for _, e := range es {
		s := e.instance().Stats()
		is := InstanceStatus{
			Name: e.name,
			Kind: e.kind.String(),
			Stats: StatusStats{
				MaxConcurrentCalls: s.MaxConcurrentCalls, AvailableConcurrentCalls: s.AvailableConcurrentCalls,
				InFlight: s.InFlight, Waiting: s.Waiting, QueueDepth: s.QueueDepth, QueueCapacity: s.QueueCapacity,
				Permitted: s.Permitted, Rejected: s.Rejected, Cancelled: s.Cancelled, Finished: s.Finished, Failed: s.Failed,
			},
			Events: []StatusEvent{},
		}
		if e.sem != nil {
			c := e.sem.Config()
			is.Config = StatusConfig{MaxConcurrentCalls: c.MaxConcurrentCalls, MaxWaitDuration: c.MaxWaitDuration.String()}
		} else {
			c := e.pool.Config()
			q := c.QueueCapacity
			is.Config = StatusConfig{MaxWorkers: c.MaxWorkers, QueueCapacity: &q, MaxWaitDuration: c.QueueTimeout.String(), KeepAlive: c.KeepAlive.String()}
		}
		if rg := e.ring.Load(); rg != nil {
			for _, rec := range rg.records() {
				is.Events = append(is.Events, StatusEvent{
					Type: rec.typ.String(), Time: rec.time.UTC(), Outcome: rec.outcome,
					Wait: durText(rec.wait), Run: durText(rec.run),
				})
			}
		}
		st.Instances = append(st.Instances, is)
	}
	return st
}

// Handler returns an http.Handler that serves [Registry.Status] as JSON
// (GET or HEAD), like Spring's bulkheads and bulkheadevents actuator
// endpoints together. ?name=x limits it to one bulkhead (404 if unknown).
//
// It shows bulkhead names, numbers and fixed words only: never error texts,
// other configuration keys, tags or anything from the environment, so it
// reveals nothing a configuration file might hold besides the limits.
//
// The first call to Handler starts keeping the last events of every
// bulkhead (EventBufferSize each, DefaultEventBufferSize by default), for
// the registry's life. From then on every call through a bulkhead builds
// two events (permitted, then finished; a rejection builds one), reads the
// clock for each, and takes the ring's mutex to store each one.
func (r *Registry) Handler() http.Handler {
	r.startRecording()
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		st := r.Status()
		if name := req.URL.Query().Get("name"); name != "" {
			var keep []InstanceStatus
			for _, is := range st.Instances {
				if is.Name == name {
					keep = append(keep, is)
				}
			}
			if keep == nil {
				http.Error(w, "no such bulkhead", http.StatusNotFound)
				return
			}
			st.Instances = keep
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	})
}

// startRecording makes every bulkhead, present and future, keep its recent
// events. It holds one listener reference for the registry's life.
func (r *Registry) startRecording() {
	r.mu.Lock()
	if r.recording {
		r.mu.Unlock()
		return
	}
	r.recording = true
	for _, e := range r.entries {
		if e.size > 0 {
			e.ring.Store(newRing(e.size))
		}
	}
	r.mu.Unlock()
	r.retain()
}
