package config

import (
	"errors"
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
	isoDuration = regexp.MustCompile(`^p(?:(\d+)d)?(?:t(?:(\d+h)?(\d+m)?(\d+(?:[.,]\d{1,9})?s)?)?)?$`)
)

// parseDuration reads milliseconds (Spring's bare integer), ISO-8601
// (PT2S, P1DT2H), "<n>d" days, or Go syntax in any case (500ms, 2S): the
// first three are rewritten in Go syntax for time.ParseDuration. One too
// large for time.Duration fails with errRange.
func parseDuration(s string) (time.Duration, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 || body == "" {
		return 0, errDuration
	}
	switch m := isoDuration.FindStringSubmatch(body); {
	case allDigits(body):
		body += "ms"
	case m != nil:
		if strings.Join(m[1:], "") == "" || strings.HasSuffix(body, "t") {
			return 0, errDuration
		}
		body = days(m[1]) + m[2] + m[3] + strings.ReplaceAll(m[4], ",", ".")
	case strings.HasSuffix(body, "d") && allDigits(body[:len(body)-1]):
		body = days(body[:len(body)-1])
	}
	d, err := time.ParseDuration(strings.TrimSuffix(s, strings.TrimLeft(s, "+-")) + body)
	switch {
	case err == nil:
		return d, nil
	case goDuration.MatchString(body):
		return 0, errRange
	}
	return 0, errDuration
}

// days returns n days in hours, in Go syntax ("" for none).
func days(n string) string {
	if n == "" {
		return ""
	}
	if d, err := strconv.ParseInt(n, 10, 64); err == nil && d < 1<<40 {
		return strconv.FormatInt(d*24, 10) + "h"
	}
	return "9999999999999999999h" // out of range
}

func allDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
