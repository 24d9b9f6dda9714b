package config

import (
	"cmp"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	errDuration = errors.New("not a duration")
	errRange    = errors.New("duration out of range")
	// goDuration matches (unsigned, lower case) what time.ParseDuration
	// reads, whatever its size; isoDuration what java.time.Duration writes.
	goDuration  = regexp.MustCompile(`^((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)
	isoDuration = regexp.MustCompile(`(?i)^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,9}))?S)?)?$`)
)

// parseDuration reads milliseconds (Spring's bare integer), ISO-8601
// (PT2S, P1DT2H), "<n>d" days, or Go syntax in any case (500ms, 2S); one
// too large for time.Duration fails with errRange.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 || body == "" {
		return 0, errDuration
	}
	var d time.Duration
	var err error
	switch last := len(body) - 1; {
	case allDigits(body):
		d, err = times(body, time.Millisecond)
	case body[0] == 'P' || body[0] == 'p':
		d, err = parseISO(body)
	case (body[last] == 'd' || body[last] == 'D') && allDigits(body[:last]):
		d, err = times(body[:last], 24*time.Hour)
	default:
		if d, err = time.ParseDuration(strings.ToLower(s)); err == nil {
			return d, nil
		}
		if goDuration.MatchString(strings.ToLower(body)) {
			return 0, errRange
		}
		return 0, errDuration
	}
	if s[0] == '-' {
		d = -d
	}
	return d, err
}

// times returns the decimal digits n times unit, or errRange.
func times(n string, unit time.Duration) (time.Duration, error) {
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil || v > int64(math.MaxInt64/unit) {
		return 0, errRange
	}
	return time.Duration(v) * unit, nil
}

func allDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// parseISO reads an ISO-8601 duration: P[nD][T[nH][nM][n[.f]S]].
func parseISO(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || strings.Join(m[1:], "") == "" || strings.ContainsAny(s[len(s)-1:], "Tt") {
		return 0, errDuration
	}
	m[5] = (m[5] + "000000000")[:9] // nanoseconds
	var total time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second, 1} {
		v, err := times(cmp.Or(m[i+1], "0"), unit)
		if err != nil || v > math.MaxInt64-total {
			return 0, errRange
		}
		total += v
	}
	return total, nil
}
