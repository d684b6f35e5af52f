package audit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Point is a place in the journal: every event with a sequence up to Seq
// and a stream time up to Time. A zero field does not bound; the zero
// Point is the end of the stream.
type Point struct {
	Seq  uint64    `json:"seq,omitempty"`
	Time time.Time `json:"time,omitzero"`
}

// IsZero reports whether p leaves the journal unbounded.
func (p Point) IsZero() bool { return p.Seq == 0 && p.Time.IsZero() }

func (p Point) String() string {
	switch {
	case p.IsZero():
		return "the end of the journal"
	case p.Time.IsZero():
		return "seq " + strconv.FormatUint(p.Seq, 10)
	case p.Seq == 0:
		return p.Time.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("seq %d and %s", p.Seq, p.Time.Format(time.RFC3339Nano))
}

// ParsePoint reads a stream sequence (decimal) or a time: RFC 3339, or a
// duration before now ("90m", "2h", "3d").
func ParsePoint(s string, now time.Time) (Point, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Point{}, nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		if n == 0 {
			return Point{}, fmt.Errorf("sequence 0: stream sequences start at 1")
		}
		return Point{Seq: n}, nil
	}
	t, err := ParseTime(s, now)
	if err != nil {
		return Point{}, fmt.Errorf("%q is neither a stream sequence nor a time: %w", s, err)
	}
	return Point{Time: t}, nil
}

// ParseTime reads an RFC 3339 time or a duration before now ("90m", "2h",
// and days as "3d", which time.ParseDuration lacks).
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("want RFC 3339 (2026-11-22T10:00:00Z) or a duration ago (2h, 3d)")
	}
	return now.Add(-d), nil
}
