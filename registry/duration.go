package registry

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
	if s == "" {
		return 0, errDuration
	}
	body := s
	if body[0] == '+' || body[0] == '-' {
		body = body[1:]
	}
	if body == "" {
		return 0, errDuration
	}
	switch {
	case allDigits(body):
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
			return 0, errRange
		}
		return time.Duration(ms) * time.Millisecond, nil
	case body[0] == 'P' || body[0] == 'p':
		d, err := parseISO(body[1:])
		if err != nil {
			return 0, err
		}
		if s[0] == '-' {
			d = -d
		}
		return d, nil
	case (body[len(body)-1] == 'd' || body[len(body)-1] == 'D') && allDigits(body[:len(body)-1]):
		n, err := strconv.ParseInt(body[:len(body)-1], 10, 64)
		if err != nil || n > int64(math.MaxInt64/(24*time.Hour)) {
			return 0, errRange
		}
		d := time.Duration(n) * 24 * time.Hour
		if s[0] == '-' {
			d = -d
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		// Spring reads units in any case; Go only in lower case.
		if d, err = time.ParseDuration(strings.ToLower(s)); err != nil {
			if goDurationSyntax.MatchString(strings.ToLower(body)) {
				return 0, errRange
			}
			return 0, errDuration
		}
	}
	return d, nil
}

// goDurationSyntax matches (unsigned, lower case) what time.ParseDuration
// reads, whatever its size: numbers, each with a unit.
var goDurationSyntax = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*$`)

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseISO reads the part of an ISO-8601 duration after "P": [nD][T[nH][nM][n[.f]S]].
func parseISO(s string) (time.Duration, error) {
	var total time.Duration
	add := func(n int64, unit time.Duration) error {
		if n > int64(math.MaxInt64/unit) {
			return errRange
		}
		v := time.Duration(n) * unit
		if total > math.MaxInt64-v {
			return errRange
		}
		total += v
		return nil
	}
	found := false
	inTime := false
	rank := 0 // units must come in the order D, H, M, S
	for len(s) > 0 {
		if s[0] == 'T' || s[0] == 't' {
			if inTime {
				return 0, errDuration
			}
			inTime = true
			s = s[1:]
			if s == "" {
				return 0, errDuration
			}
			continue
		}
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, errDuration
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil {
			return 0, errRange
		}
		s = s[i:]
		frac := ""
		if len(s) > 0 && (s[0] == '.' || s[0] == ',') {
			j := 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			frac = s[1:j]
			if frac == "" || len(frac) > 9 {
				return 0, errDuration
			}
			s = s[j:]
		}
		if s == "" {
			return 0, errDuration
		}
		u := s[0] | 0x20 // lower case
		s = s[1:]
		r := strings.IndexByte("dhms", u) + 1
		if r <= rank {
			return 0, errDuration
		}
		rank = r
		if frac != "" && u != 's' {
			return 0, errDuration
		}
		switch {
		case u == 'd' && !inTime:
			err = add(n, 24*time.Hour)
		case u == 'h' && inTime:
			err = add(n, time.Hour)
		case u == 'm' && inTime:
			err = add(n, time.Minute)
		case u == 's' && inTime:
			if err = add(n, time.Second); err == nil && frac != "" {
				f, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
				err = add(f, time.Nanosecond)
			}
		default:
			return 0, errDuration
		}
		if err != nil {
			return 0, err
		}
		found = true
	}
	if !found {
		return 0, errDuration
	}
	return total, nil
}
