package ratelimit

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	good := map[string]Rate{
		"20/s":      {20, time.Second, 20},
		"20/s:40":   {20, time.Second, 40},
		"600/m":     {600, time.Minute, 600},
		"1/h:1":     {1, time.Hour, 1},
		"1000000/s": {MaxCount, time.Second, MaxCount},
		"5/s:1":     {5, time.Second, 1},
	}
	for s, want := range good {
		got, err := Parse(s)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", s, got, err, want)
		}
		if back, err := Parse(got.String()); err != nil || back != got {
			t.Errorf("%q: String %q parses back as %+v, %v", s, got.String(), back, err)
		}
	}
	bad := map[string]string{
		"":           `no "/"`,
		"20":         `no "/"`,
		"20/d":       `unit "d"`,
		"20/S":       `unit "S"`,
		"20/sec":     `unit "sec"`,
		"0/s":        "count",
		"-1/s":       "count",
		"+1/s":       "count",
		" 1/s":       "count",
		"1.5/s":      "count",
		"1000001/s":  "count",
		"20/s:":      "burst",
		"20/s:0":     "burst",
		"20/s:1:2":   "burst",
		"99999999/s": "count",
	}
	for s, want := range bad {
		_, err := Parse(s)
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "N/s, N/m or N/h") {
			t.Errorf("Parse(%q) = %v; want ErrSyntax naming %s and the syntax", s, err, want)
		}
	}
}

func TestRateLimitAndWords(t *testing.T) {
	r, _ := Parse("600/m:20")
	if r.Limit() != 10 {
		t.Errorf("600/m is %v per second", r.Limit())
	}
	if w := r.Words("calls"); w != "600 calls per minute (bursts of 20)" {
		t.Errorf("words: %q", w)
	}
	if (Rate{}).String() != "" || !(Rate{}).IsZero() {
		t.Error("the zero rate")
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 59500 * time.Millisecond: 60} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestParseOverrides(t *testing.T) {
	got, err := ParseOverrides(" api=50/s , admin=off,anonymous=5/s:10,3f2a9c1b0d4e=1/m")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got["api"].Count != 50 || !got["admin"].IsZero() || got["anonymous"].Burst != 10 || got["3f2a9c1b0d4e"].Per != time.Minute {
		t.Errorf("overrides: %+v", got)
	}
	if m, err := ParseOverrides("  "); err != nil || len(m) != 0 {
		t.Errorf("empty: %v %v", m, err)
	}
	for s, want := range map[string]string{
		"api":                        `no "="`,
		"api=50/s,api=10/s":          "named twice",
		"sk-0123456789abcdefXYZ=5/s": "does not name a key",
		"3F2A9C1B0D4E=5/s":           "does not name a key",
		"api=fast":                   "api: invalid rate",
		"api=50/s,,admin=1/s":        `no "="`,
		"3f2a9c1b0d4e0011223344=1/s": "does not name a key",
		"=5/s":                       "does not name a key",
	} {
		_, err := ParseOverrides(s)
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseOverrides(%q) = %v; want %s", s, err, want)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts it writes back as it reads it, within
// the bounds.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"20/s", "20/s:40", "600/m", "1/h", "0/s", "1/s:", "x", "1000000/h:1000000", "/", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("%q: error %v is not ErrSyntax", s, err)
			}
			return
		}
		if r.Count < 1 || r.Count > MaxCount || r.Burst < 1 || r.Burst > MaxBurst || r.Limit() <= 0 {
			t.Fatalf("%q parsed out of bounds: %+v", s, r)
		}
		if back, err := Parse(r.String()); err != nil || back != r {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, r, r.String(), back, err)
		}
	})
}

// FuzzParseOverrides: never panics; every name accepted has the shape of a key name.
func FuzzParseOverrides(f *testing.F) {
	for _, s := range []string{"api=50/s,admin=off", "3f2a9c1b0d4e=5/s", "a=1/s,a=1/s", "=,=", "api=1/s:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseOverrides(s)
		if err != nil {
			return
		}
		for name := range m {
			if !KeyName.MatchString(name) {
				t.Fatalf("%q: name %q accepted", s, name)
			}
		}
	})
}
