package registry

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/bulkhead-go/bulkhead/registry/internal/config"
)

// reloads is what Follow did, for the metrics and the status page (r.mu).
type reloads struct {
	Path        string    `json:"path"`
	Applied     uint64    `json:"applied"`
	Refused     uint64    `json:"refused"`
	LastApplied time.Time `json:"lastApplied"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
}

// Follow applies the file at path, read as [LoadFile] reads it, with
// [Registry.Reconfigure], then again every every until ctx ends whenever
// its content (not its modification time) changed, all or nothing. It
// blocks, starting no goroutine (run it in one), and returns at once with
// the first read's or apply's error.
//
// A later file that is missing, empty or invalid, or that no longer lists an
// instance in use, is refused and the running configuration stays. Each
// outcome is counted once per content in bulkhead_config_reloads_total and
// shown on the status page (docs/configuration.md, "Following a file").
func (r *Registry) Follow(ctx context.Context, path string, every time.Duration) error {
	if ctx == nil {
		panic("registry: Follow called with a nil Context")
	}
	if every <= 0 {
		return fmt.Errorf("registry: Follow: every must be > 0, got %v", every)
	}
	cfg, running, err := config.LoadFile(path, os.LookupEnv)
	if err == nil {
		err = r.reconfigure(cfg, true)
	}
	if err != nil {
		return err
	}
	r.noteReload(path, nil)
	// What the last read found: its content, or the error that left none.
	seen, seenMsg := running, ""
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		cfg, srcs, err := config.LoadFile(path, os.LookupEnv)
		switch {
		case srcs != nil && sameSources(srcs, seen), srcs == nil && err != nil && err.Error() == seenMsg:
			continue // counted already
		case srcs != nil && sameSources(srcs, running):
			r.clearReloadError() // the running content is back after a refusal
			seen, seenMsg = running, ""
			continue
		}
		if err == nil {
			err = r.reconfigure(cfg, true)
		}
		r.noteReload(path, err)
		seen, seenMsg = srcs, ""
		if err == nil {
			running = srcs
		} else if srcs == nil {
			seenMsg = err.Error()
		}
	}
}

// sameSources reports whether a and b are the same files with the same
// content.
func sameSources(a, b []config.Source) bool {
	return b != nil && slices.EqualFunc(a, b, func(x, y config.Source) bool { return x.Name == y.Name && bytes.Equal(x.Data, y.Data) })
}

func (r *Registry) noteReload(path string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reloads == nil {
		r.reloads = &reloads{}
	}
	st := r.reloads
	st.Path = path
	if err != nil {
		st.Refused++
		st.LastError, st.LastErrorAt = err.Error(), time.Now()
		return
	}
	st.Applied++
	st.LastApplied = time.Now()
}

func (r *Registry) clearReloadError() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reloads.LastError, r.reloads.LastErrorAt = "", time.Time{}
}

// reloadStatus returns a copy of what Follow did, or nil if it never ran.
func (r *Registry) reloadStatus() *reloads {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reloads == nil {
		return nil
	}
	st := *r.reloads
	return &st
}
