package registry

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
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
// [Registry.Reconfigure], then every every until ctx ends whenever its
// content (not its modification time) changed, all or nothing. It blocks,
// starting no goroutine, and returns at once with the first read's or
// apply's error. A later file that is missing, empty, invalid or drops an
// instance in use keeps the running configuration (docs/configuration.md).
func (r *Registry) Follow(ctx context.Context, path string, every time.Duration) error {
	if ctx == nil {
		panic("registry: Follow called with a nil Context")
	}
	if every <= 0 {
		return fmt.Errorf("registry: Follow: every must be > 0, got %v", every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var running, seen string // digests of the running configuration's files and of the last read ("" if none)
	for {
		cfg, srcs, err := config.LoadFile(path, os.LookupEnv)
		found := digest(srcs, err)
		switch found {
		case seen: // counted already
		case running: // back after a refusal
			r.mu.Lock()
			r.reloads.LastError, r.reloads.LastErrorAt = "", time.Time{}
			r.mu.Unlock()
		default:
			var switched bool
			if err == nil {
				switched, err = r.reconfigure(cfg, true)
			}
			if err != nil && seen == "" {
				return err // the first read
			}
			r.noteReload(path, err)
			if err == nil {
				running = found
			} else if switched { // applied in part: no content is in force, the next is applied in full
				running = ""
			}
		}
		seen = found
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// digest identifies what a read found: the files and their content, or the
// error that left none.
func digest(srcs []config.Source, err error) string {
	h := sha256.New()
	if srcs == nil {
		fmt.Fprintf(h, "error %v", err)
	}
	for _, s := range srcs {
		fmt.Fprintf(h, "file %q %d\n", s.Name, len(s.Data))
		h.Write(s.Data)
	}
	return string(h.Sum(nil))
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
	return new(*r.reloads)
}
