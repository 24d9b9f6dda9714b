package registry

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const keyedPoolYAML = `resilience4j.thread-pool-bulkhead:
  instances:
    exports: {maxThreadPoolSize: 2, queueCapacity: 4, maxRunningPerKey: 1, queue-capacity-per-key: 1}
    plain: {maxThreadPoolSize: 2}
`

// A thread-pool instance with maxRunningPerKey or queueCapacityPerKey is a
// keyed pool: Pool and KeyedPool each refuse the other form, saying which
// it is; its metrics and status page show key counts, never a key; Close
// closes it.
func TestKeyedPoolFromYAML(t *testing.T) {
	r := newTestRegistry(t, keyedPoolYAML)
	k, err := r.KeyedPool("exports")
	if err != nil {
		t.Fatal(err)
	}
	if c := k.Config(); c.MaxWorkers != 2 || c.QueueCapacity != 4 || c.MaxRunningPerKey != 1 || c.QueueCapacityPerKey != 1 {
		t.Fatalf("config %+v", c)
	}
	ctx := context.Background()
	release := make(chan struct{})
	block := func(context.Context) (int, error) { <-release; return 0, nil }
	var fs []*future.Future[int]
	for _, key := range []string{"secret-a", "secret-a", "secret-b"} { // a runs, a queued, b runs
		f, err := pool.SubmitKeyed(ctx, k, key, block)
		if err != nil {
			t.Fatal(key, err)
		}
		fs = append(fs, f)
	}
	var fe *bulkhead.FullError
	if _, err := pool.SubmitKeyed(ctx, k, "secret-a", block); !errors.As(err, &fe) || fe.Reason != bulkhead.ReasonKey {
		t.Fatalf("a full lane: %v, want ReasonKey", err)
	}
	if running, queued := k.Key("secret-a"); running != 1 || queued != 1 {
		t.Fatalf("Key: %d running, %d queued; want 1, 1", running, queued)
	}

	if _, err := r.Pool("exports"); err == nil || !strings.Contains(err.Error(), `pool "exports" is keyed (maxRunningPerKey or queueCapacityPerKey): get it with KeyedPool`) {
		t.Errorf("Pool on a keyed one: %v", err)
	}
	if _, err := r.KeyedPool("plain"); err == nil || !strings.Contains(err.Error(), `pool "plain" is not keyed`) {
		t.Errorf("KeyedPool on a plain one: %v", err)
	}
	if _, err := r.KeyedPool("unlisted"); err == nil {
		t.Error("KeyedPool on an unlisted plain one succeeded")
	}
	if _, found := r.Find(bulkhead.Pool, "unlisted"); found {
		t.Error("a refused KeyedPool created the instance")
	}

	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	want := `
# HELP bulkhead_active_keys Keys of a keyed bulkhead that hold or wait for capacity now.
# TYPE bulkhead_active_keys gauge
bulkhead_active_keys{kind="pool",name="exports"} 2
# HELP bulkhead_keyed_rejections_total Calls a keyed bulkhead refused, by reason: key (its key's limit), total (the shared total) or keys (MaxActiveKeys).
# TYPE bulkhead_keyed_rejections_total counter
bulkhead_keyed_rejections_total{kind="pool",name="exports",reason="key"} 1
bulkhead_keyed_rejections_total{kind="pool",name="exports",reason="keys"} 0
bulkhead_keyed_rejections_total{kind="pool",name="exports",reason="total"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkhead_active_keys", "bulkhead_keyed_rejections_total"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if s := mf.String(); strings.Contains(s, "secret-") {
			t.Fatalf("a key reached the metrics: %s", s)
		}
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/?name=exports", nil))
	body := rec.Body.String()
	for _, w := range []string{`"maxRunningPerKey": 1`, `"queueCapacityPerKey": 1`, `"maxWorkers": 2`, `"active": 2`, `"rejectedKey": 1`} {
		if !strings.Contains(body, w) {
			t.Errorf("status page lacks %s:\n%s", w, body)
		}
	}
	if strings.Contains(body, "secret-") {
		t.Errorf("a key reached the status page:\n%s", body)
	}
	close(release)
	if _, err := future.All(ctx, fs...); err != nil {
		t.Fatal(err)
	}

	// Reconfigure moves the limits, and refuses to change the form of a
	// live pool.
	if err := r.Reconfigure(mustLoad(t, strings.Replace(keyedPoolYAML, "maxRunningPerKey: 1", "maxRunningPerKey: 2", 1))); err != nil {
		t.Fatal(err)
	}
	if c := k.Config(); c.MaxRunningPerKey != 2 || c.QueueCapacityPerKey != 1 {
		t.Errorf("config %+v after Reconfigure, want maxRunningPerKey 2", c)
	}
	plain := strings.Replace(keyedPoolYAML, ", maxRunningPerKey: 1, queue-capacity-per-key: 1", "", 1)
	if err := r.Reconfigure(mustLoad(t, plain)); err == nil || !strings.Contains(err.Error(), `makes pool "exports" plain`) {
		t.Errorf("keyed to plain: %v", err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.SubmitKeyed(ctx, k, "a", block); !errors.Is(err, bulkhead.ErrClosed) {
		t.Errorf("SubmitKeyed after the registry's Close: %v, want ErrClosed", err)
	}
}

func TestKeyedPoolErrors(t *testing.T) {
	const p = "resilience4j.thread-pool-bulkhead."
	for in, want := range map[string]string{
		p + "instances.t: {maxThreadPoolSize: 2, maxRunningPerKey: 3}\n":                    `line 1: pool instance "t": maxRunningPerKey must be between 0 and maxThreadPoolSize (2) (0 means maxThreadPoolSize), got 3`,
		p + "instances.t: {queueCapacity: 4, queueCapacityPerKey: 5}\n":                     `pool instance "t": queueCapacityPerKey must be between 0 and queueCapacity (4) (0 means queueCapacity), got 5`,
		p + "instances.t: {queueCapacityPerKey: -1}\n":                                      `queueCapacityPerKey must be between 0 and queueCapacity`,
		p + "instances.t: {maxRunningPerKey: 1, adaptive: {maxLimit: 9}}\n":                 `pool instance "t": adaptive is not supported on a keyed pool`,
		p + "instances.t: {maxRunningPerKey: 1, queueOrder: lifo}\n":                        `pool instance "t": queueOrder must be fifo on a keyed pool`,
		p + "instances.t: {maxRunningPerKey: 1, codel: {targetDelay: 5ms, interval: 1s}}\n": `pool instance "t": codel is not supported on a keyed pool`,
		p + "configs.default: {maxRunningPerKey: -1}\n" + p + "instances.t: {}\n":           `pool config "default": maxRunningPerKey must be between 0`,
		p + "instances.t: {maxRunningPerKy: 2}\n":                                           `did you mean "maxRunningPerKey"?`,
	} {
		wantLoadErr(t, in, want)
	}
	err := Config{Pools: map[string]PoolSpec{"t": {MaxRunningPerKey: new(-1)}}}.Validate()
	if err == nil || !strings.Contains(err.Error(), `(at Pools["t"].MaxRunningPerKey)`) {
		t.Errorf("code config: %v", err)
	}
}
