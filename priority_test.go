package bulkhead_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

func TestPriorityZeroIsCritical(t *testing.T) {
	var p bulkhead.Priority
	if p != bulkhead.Critical {
		t.Fatalf("zero Priority = %v, want critical", p)
	}
	if got := bulkhead.PriorityFrom(context.Background()); got != bulkhead.Critical {
		t.Fatalf("PriorityFrom(Background) = %v, want critical", got)
	}
	ctx := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
	if got := bulkhead.PriorityFrom(ctx); got != bulkhead.Sheddable {
		t.Fatalf("PriorityFrom = %v, want sheddable", got)
	}
	if got := bulkhead.PriorityFrom(bulkhead.WithPriority(ctx, bulkhead.CriticalPlus)); got != bulkhead.CriticalPlus {
		t.Fatalf("the inner WithPriority does not win: %v", got)
	}
}

func TestPriorityText(t *testing.T) {
	for _, p := range []bulkhead.Priority{bulkhead.Sheddable, bulkhead.SheddablePlus, bulkhead.Critical, bulkhead.CriticalPlus} {
		b, err := p.MarshalText()
		if err != nil || string(b) != p.String() {
			t.Fatalf("MarshalText(%v) = %q, %v", p, b, err)
		}
		var q bulkhead.Priority = 7
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Fatalf("UnmarshalText(%q) = %v, %v", b, q, err)
		}
	}
	for in, want := range map[string]bulkhead.Priority{"CRITICAL_PLUS": bulkhead.CriticalPlus,
		"sheddable_plus": bulkhead.SheddablePlus, "Sheddable": bulkhead.Sheddable} {
		var q bulkhead.Priority
		if err := q.UnmarshalText([]byte(in)); err != nil || q != want {
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", in, q, err, want)
		}
	}
	var q bulkhead.Priority = bulkhead.SheddablePlus
	if err := q.UnmarshalText([]byte("urgent")); err == nil || !strings.Contains(err.Error(), `"urgent"`) || q != bulkhead.SheddablePlus {
		t.Fatalf("UnmarshalText(urgent) = %v, left %v", err, q)
	}
	if got := bulkhead.Priority(5).String(); got != "Priority(5)" {
		t.Fatalf("String of 5 = %q", got)
	}
	if _, err := bulkhead.Priority(-3).MarshalText(); err == nil {
		t.Fatal("MarshalText(-3) did not fail")
	}
}

func TestPrioritiesValidate(t *testing.T) {
	for _, c := range []struct {
		p    bulkhead.Priorities
		want string // "" for valid
	}{
		{bulkhead.Priorities{}, ""},
		{bulkhead.Priorities{Sheddable: 0.1, SheddablePlus: 0.1, Critical: 0.9, Aging: time.Second}, ""},
		{bulkhead.Priorities{Sheddable: 1.5}, "sheddable must be in (0, 1]"},
		{bulkhead.Priorities{Critical: -0.5}, "critical must be in (0, 1]"},
		{bulkhead.Priorities{SheddablePlus: math.NaN()}, "sheddablePlus must be in (0, 1]"},
		{bulkhead.Priorities{Sheddable: 0.9}, "sheddable (0.9) must not exceed sheddablePlus (0.8, the default)"},
		{bulkhead.Priorities{SheddablePlus: 0.9, Critical: 0.7}, "sheddablePlus (0.9) must not exceed critical (0.7)"},
		{bulkhead.Priorities{Aging: -time.Second}, "aging must be >= 0, got -1s"},
	} {
		err := c.p.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.p, err, c.want)
		}
	}
}

func TestPrioritiesCeiling(t *testing.T) {
	var d bulkhead.Priorities
	for _, c := range []struct {
		p         *bulkhead.Priorities
		limit     int
		s, sp, cr int
	}{
		{&d, 10, 5, 8, 10},
		{&d, 1, 1, 1, 1}, // rounded up: no class gets zero permits
		{&d, 3, 2, 3, 3},
		{&bulkhead.Priorities{Sheddable: 0.7, SheddablePlus: 0.7, Critical: 0.9}, 10, 7, 7, 9}, // 0.7 × 10 is 7, not 8
		{&bulkhead.Priorities{Sheddable: 0.01, Critical: 0.99}, 2, 1, 2, 2},
	} {
		got := [4]int{c.p.Ceiling(bulkhead.Sheddable, c.limit), c.p.Ceiling(bulkhead.SheddablePlus, c.limit),
			c.p.Ceiling(bulkhead.Critical, c.limit), c.p.Ceiling(bulkhead.CriticalPlus, c.limit)}
		if want := [4]int{c.s, c.sp, c.cr, c.limit}; got != want {
			t.Errorf("%+v at limit %d: %v, want %v", *c.p, c.limit, got, want)
		}
	}
	if got := d.Ceiling(-9, 10); got != 5 {
		t.Errorf("below Sheddable: %d, want Sheddable's 5", got)
	}
	if got := d.Ceiling(9, 10); got != 10 {
		t.Errorf("above CriticalPlus: %d, want 10", got)
	}
	if got := d.Ceiling(bulkhead.Sheddable, 0); got != 0 {
		t.Errorf("limit 0: %d", got)
	}
}

// A service labels its batch traffic; a bulkhead with the default
// Priorities lets it fill 8 of 10 permits, and keeps the whole limit for
// unlabelled (Critical) calls.
func ExampleWithPriority() {
	ctx := bulkhead.WithPriority(context.Background(), bulkhead.SheddablePlus)
	p := bulkhead.PriorityFrom(ctx)
	var shares bulkhead.Priorities // the defaults
	fmt.Println(p, shares.Ceiling(p, 10), shares.Ceiling(bulkhead.Critical, 10))
	// Output: sheddablePlus 8 10
}
