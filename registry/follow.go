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

// Follow keeps the registry configured from the file at path, read as
// [LoadFile] reads it (with its profile files): it reads it and applies it
// with [Registry.Reconfigure], then reads it again every every until ctx
// ends, applying each configuration whose content changed, all or nothing.
// It blocks, and starts no goroutine of its own: run it in one, as with
// http.Server.Serve. It returns at once with the error of the first read
// or apply, and ctx's error when ctx ends.
//
// It compares the files' content, not their modification times, so a
// Kubernetes ConfigMap's symlink swap is seen. A later file that is
// missing, empty or invalid, or whose configuration no longer lists an
// instance the running one lists and the registry holds, is refused: the
// running configuration stays. Each outcome is counted once per content
// (bulkhead_config_reloads_total{result="applied"|"refused"}), and the
// status page shows the last applied time and the last error.
func (r *Registry) Follow(ctx context.Context, path string, every time.Duration) error {
	if ctx == nil {
		panic("registry: Follow called with a nil Context")
	}
	if every <= 0 {
		return fmt.Errorf("registry: Follow: every must be > 0, got %v", every)
	}
	cfg, last, err := config.LoadFile(path, os.LookupEnv)
	if err == nil {
		err = r.reconfigure(cfg, true)
	}
	if err != nil {
		return err
	}
	r.noteReload(path, nil)
	lastErr := ""
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		cfg, srcs, err := config.LoadFile(path, os.LookupEnv)
		if err == nil {
			if slices.EqualFunc(srcs, last, func(a, b config.Source) bool { return a.Name == b.Name && bytes.Equal(a.Data, b.Data) }) {
				continue
			}
			err = r.reconfigure(cfg, true)
		}
		msg := ""
		if err != nil {
			if msg = err.Error(); msg == lastErr {
				continue // reported already
			}
		}
		r.noteReload(path, err)
		last, lastErr = srcs, msg
		if err != nil {
			last = nil // the next readable content is tried, even the old one
		}
	}
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
