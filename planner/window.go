package planner

import (
	"fmt"
	"strings"
	"time"
)

// Window is a weekly maintenance window: on the given weekdays, from Start
// to End (minutes after midnight). An End at or before Start runs past
// midnight into the next day. The zero Window is always open.
type Window struct {
	Days       [7]bool // by time.Weekday: the day the window opens
	Start, End int     // minutes after midnight
	set        bool
	text       string
}

var weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// ParseWindow reads "Sat 02:00-05:00", "Mon-Fri 22:00-01:00",
// "Sat,Sun 01:00-04:00" or "03:00-04:00" (every day). "" is always open.
func ParseWindow(s string) (Window, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Window{}, nil
	}
	w := Window{set: true, text: s}
	days, span, ok := strings.Cut(s, " ")
	if !ok {
		days, span = "", s
		for i := range w.Days {
			w.Days[i] = true
		}
	}
	for _, part := range strings.Split(days, ",") {
		if part == "" {
			continue
		}
		from, to, isRange := strings.Cut(part, "-")
		a, ok1 := weekdays[strings.ToLower(from)]
		b, ok2 := a, true
		if isRange {
			b, ok2 = weekdays[strings.ToLower(to)]
		}
		if !ok1 || !ok2 {
			return Window{}, fmt.Errorf("%q: days must be Mon..Sun, a range such as Mon-Fri, or a list such as Sat,Sun", s)
		}
		for d := a; ; d = (d + 1) % 7 {
			w.Days[d] = true
			if d == b {
				break
			}
		}
	}
	from, to, ok := strings.Cut(strings.TrimSpace(span), "-")
	var err error
	if w.Start, err = clockMinutes(from); ok && err == nil {
		w.End, err = clockMinutes(to)
	}
	if !ok || err != nil {
		return Window{}, fmt.Errorf("%q: want [days ]HH:MM-HH:MM, e.g. \"Sat 02:00-05:00\"", s)
	}
	if w.Start == w.End {
		return Window{}, fmt.Errorf("%q: the window is empty", s)
	}
	return w, nil
}

func clockMinutes(s string) (int, error) {
	t, err := time.Parse("15:04", strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	return t.Hour()*60 + t.Minute(), nil
}

// String is the window as it was written ("always" for the zero one).
func (w Window) String() string {
	if !w.set {
		return "always"
	}
	return w.text
}

// length is the window's duration in minutes.
func (w Window) length() int {
	if w.End > w.Start {
		return w.End - w.Start
	}
	return 24*60 - w.Start + w.End
}

// Open reports whether t (in its own location) lies inside the window.
func (w Window) Open(t time.Time) bool {
	if !w.set {
		return true
	}
	mins := t.Hour()*60 + t.Minute()
	// Opened today, or opened yesterday and still running past midnight.
	if w.Days[t.Weekday()] && mins >= w.Start && mins-w.Start < w.length() {
		return true
	}
	y := (t.Weekday() + 6) % 7
	return w.End <= w.Start && w.Days[y] && mins < w.End
}

// Next is when the window next opens at or after t (t itself if open).
func (w Window) Next(t time.Time) time.Time {
	if w.Open(t) {
		return t
	}
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
	for i := 0; i <= 7; i++ {
		d := day.AddDate(0, 0, i)
		// The wall-clock time, not midnight plus minutes: a day with a
		// daylight-saving change is not 24 hours long.
		at := time.Date(d.Year(), d.Month(), d.Day(), w.Start/60, w.Start%60, 0, 0, t.Location())
		if w.Days[d.Weekday()] && !at.Before(t) {
			return at
		}
	}
	return t // unreachable for a non-empty window
}
