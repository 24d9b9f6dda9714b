package config

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"0": 0, "500": 500 * time.Millisecond, "+20": 20 * time.Millisecond, "-1": -time.Millisecond,
		"500ms": 500 * time.Millisecond, "2s": 2 * time.Second, "1m30s": 90 * time.Second, "1.5s": 1500 * time.Millisecond,
		"PT2S": 2 * time.Second, "PT0.5S": 500 * time.Millisecond, "pt1m": time.Minute, "PT0S": 0,
		"P1DT2H": 26 * time.Hour, "PT1H2M3.000000004S": time.Hour + 2*time.Minute + 3*time.Second + 4,
		"-PT1S": -time.Second, "PT1,5S": 1500 * time.Millisecond, "2d": 48 * time.Hour, " 3s ": 3 * time.Second,
	}
	for in, want := range good {
		got, err := parseDuration(in)
		if err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-", "abc", "P", "PT", "P1H", "PT1D", "PT1.5M", "PT1S2M", "PT1S1S", "1.5", "P1W", "P1Y",
		"PT9999999999999999H", "99999999999999999999", "9999999999999999999ms", "P106751DT24H", "PT.5S", "PT1.1234567890S", "1e3"} {
		if got, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", in, got)
		}
	}
}
