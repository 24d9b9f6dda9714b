package bulkheadhttp

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// Option configures a [Transport] or a [Handler]. [WithClassifier] applies
// to both; the other options apply to Handler only, and Transport panics if
// it is given one of them.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	classify   func(status int, err error) error
	status     int
	retryAfter string // the Retry-After header's value; empty for none
	reject     func(http.ResponseWriter, *http.Request, error)
	bypass     func(*http.Request) bool
	priority   string // WithPriorityHeader's header, canonical; empty for none
	serverOnly string // the first Handler-only option given, for Transport's panic
}

func newConfig(opts []Option) config {
	c := config{classify: Classify, status: http.StatusServiceUnavailable, retryAfter: "1"}
	for _, o := range opts {
		if o == nil {
			panic("bulkheadhttp: nil Option")
		}
		o.apply(&c)
	}
	return c
}

// serverOption marks c as configured by a Handler-only option.
func (c *config) serverOption(name string) {
	if c.serverOnly == "" {
		c.serverOnly = name
	}
}

// WithClassifier replaces [Classify] as the rule that decides the outcome of
// a call: classify gets the response's status (0 when the Transport got no
// response) and the transport's error (always nil for a Handler), and
// returns nil for a success or the error to count the call failed with,
// which the call's EventFinished carries. A panic in a handler counts as
// failed whatever classify says.
func WithClassifier(classify func(status int, err error) error) Option {
	if classify == nil {
		panic("bulkheadhttp: WithClassifier called with a nil function")
	}
	return optionFunc(func(c *config) { c.classify = classify })
}

// WithStatus sets the status a Handler answers a refused request with:
// http.StatusServiceUnavailable (503, the default) or
// http.StatusTooManyRequests (429). Any other status panics.
func WithStatus(status int) Option {
	if status != http.StatusServiceUnavailable && status != http.StatusTooManyRequests {
		panic(fmt.Sprintf("bulkheadhttp: WithStatus(%d): the status must be 503 or 429", status))
	}
	return optionFunc(func(c *config) { c.status = status; c.serverOption("WithStatus") })
}

// WithRetryAfter sets the Retry-After header of a Handler's refusal, in
// whole seconds rounded up (any d up to the largest time.Duration, 292
// years); 0 leaves the header out. The default is 1s. A negative d panics.
func WithRetryAfter(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("bulkheadhttp: WithRetryAfter(%v): the duration must be >= 0", d))
	}
	v := ""
	if d > 0 {
		s := d / time.Second
		if d%time.Second != 0 {
			s++ // rounded up without d+time.Second-1, which overflows near the largest d
		}
		v = strconv.FormatInt(int64(s), 10)
	}
	return optionFunc(func(c *config) { c.retryAfter = v; c.serverOption("WithRetryAfter") })
}

// WithRejectHandler replaces a Handler's answer to a request that got no
// permit. reject gets the reason: a [*bulkhead.FullError], which matches
// [bulkhead.ErrBulkheadFull], when the bulkhead was full, or the request
// context's error when it ended while the request waited. WithStatus and
// WithRetryAfter no longer apply.
func WithRejectHandler(reject func(w http.ResponseWriter, r *http.Request, err error)) Option {
	if reject == nil {
		panic("bulkheadhttp: WithRejectHandler called with a nil function")
	}
	return optionFunc(func(c *config) { c.reject = reject; c.serverOption("WithRejectHandler") })
}

// WithBypass lets the requests for which bypass returns true (health
// checks, metrics scrapes) through a Handler without a permit: they are
// never refused, and not counted.
func WithBypass(bypass func(*http.Request) bool) Option {
	if bypass == nil {
		panic("bulkheadhttp: WithBypass called with a nil function")
	}
	return optionFunc(func(c *config) { c.bypass = bypass; c.serverOption("WithBypass") })
}

// Classify is the default outcome rule. It returns err when the call failed
// in the transport, a [*StatusError] for a 5xx status, and nil otherwise.
// Wrap it in [WithClassifier] to count more statuses, such as 429, as
// failures.
func Classify(status int, err error) error {
	if err != nil {
		return err
	}
	if status >= 500 && status <= 599 {
		return &StatusError{Code: status}
	}
	return nil
}

// StatusError is the outcome of a call that got a response whose status
// counts as a failure. A 429 or 503 StatusError also matches
// [bulkhead.ErrOverloaded] under errors.Is: the dependency refused the call
// for lack of capacity.
type StatusError struct {
	// Code is the response's status code.
	Code int
}

// Error returns, for example, "http status 503 (Service Unavailable)".
func (e *StatusError) Error() string {
	s := "http status " + strconv.Itoa(e.Code)
	if text := http.StatusText(e.Code); text != "" {
		s += " (" + text + ")"
	}
	return s
}

// Is reports whether target is [bulkhead.ErrOverloaded] and the status 429
// or 503.
func (e *StatusError) Is(target error) bool {
	return target == bulkhead.ErrOverloaded &&
		(e.Code == http.StatusTooManyRequests || e.Code == http.StatusServiceUnavailable)
}
