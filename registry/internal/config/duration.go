package config

import (
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
)

// parseDuration reads a duration the way the YAML loader accepts it: a bare
// integer is milliseconds (Spring's convention, "0" included), a string
// starting with P (after an optional sign) is ISO-8601 as java.time.Duration
// writes it (PT2S, PT0.5S, P1DT2H), "<n>d" is days (Spring's simple format),
// and anything else is Go syntax (500ms, 1m30s), with units in any case as
// Spring accepts them (500MS, 2S). It does not judge the sign: a negative
// result is returned for the caller to refuse. A duration too large for
// time.Duration fails with errRange.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	body := s
	if s != "" && (s[0] == '+' || s[0] == '-') {
		body = s[1:]
	}
	var d time.Duration
	var err error
	switch last := len(body) - 1; {
	case body == "":
		return 0, errDuration
	case allDigits(body):
		d, err = times(body, time.Millisecond)
	case body[0] == 'P' || body[0] == 'p':
		d, err = parseISO(body[1:])
	case (body[last] == 'd' || body[last] == 'D') && allDigits(body[:last]):
		d, err = times(body[:last], 24*time.Hour)
	default:
		if d, err = time.ParseDuration(s); err == nil {
			return d, nil
		}
		// Spring reads units in any case; Go only in lower case.
		if d, err = time.ParseDuration(strings.ToLower(s)); err == nil {
			return d, nil
		}
		if goDurationSyntax.MatchString(strings.ToLower(body)) {
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

// goDurationSyntax matches (unsigned, lower case) what time.ParseDuration
// reads, whatever its size: numbers, each with a unit.
var goDurationSyntax = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*$`)

func allDigits(s string) bool { return s != "" && leadingDigits(s) == len(s) }

func leadingDigits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// parseISO reads the part of an ISO-8601 duration after "P":
// [nD][T[nH][nM][n[.f]S]], each unit at most once and in that order.
func parseISO(s string) (time.Duration, error) {
	var total time.Duration
	inTime, rank := false, 0
	for s != "" {
		if s[0] == 'T' || s[0] == 't' {
			if inTime || len(s) == 1 {
				return 0, errDuration
			}
			inTime, s = true, s[1:]
			continue
		}
		i := leadingDigits(s)
		n, frac := s[:i], ""
		if i < len(s) && (s[i] == '.' || s[i] == ',') {
			j := i + 1 + leadingDigits(s[i+1:])
			frac, i = s[i+1:j], j
			if frac == "" || len(frac) > 9 {
				return 0, errDuration
			}
		}
		if n == "" || i == len(s) {
			return 0, errDuration
		}
		u := s[i] | 0x20 // lower case
		s = s[i+1:]
		r := strings.IndexByte("dhms", u) + 1 // 0 for another letter
		if r <= rank || (r == 1) == inTime || (frac != "" && u != 's') {
			return 0, errDuration
		}
		rank = r
		v, err := times(n, [...]time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second}[r-1])
		var f time.Duration
		if frac != "" {
			x, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
			f = time.Duration(x)
		}
		if err != nil || v > math.MaxInt64-total-f {
			return 0, errRange
		}
		total += v + f
	}
	if rank == 0 {
		return 0, errDuration
	}
	return total, nil
}
