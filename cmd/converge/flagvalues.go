package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Settings that can be switched off or unlimited bind two fields of a
// package's config: the number and its explicit off (or unlimited) field.
// A flag takes the number or the keyword; a negative number, which meant
// the same before the keywords, is still taken, and noted for a warning
// naming the keyword (docs/configuration.md).

// offDuration is a duration flag that also takes "off".
type offDuration struct {
	d   *time.Duration
	off *bool
	// set reports whether the flag was given (on the command line, in the
	// environment or the file), for defaults that follow another setting.
	set  bool
	name string
	note func(string)
	// follows names the setting an unset flag follows ("" for none): the
	// flag then shows no value of its own, which would be wrong once that
	// setting is given, and 0, which meant "follow" before 0 was refused,
	// is taken as not given, with a warning.
	follows string
}

func (v *offDuration) String() string {
	switch {
	case *v.off:
		return "off"
	case !v.set && v.follows != "":
		return ""
	}
	return v.d.String()
}

func (v *offDuration) Type() string { return "duration" }

func (v *offDuration) Set(s string) error {
	if v.follows != "" && (s == "" || s == "0" || s == "0s") {
		if s != "" {
			v.note(fmt.Sprintf("--%s %s: 0 is deprecated (it meant %s, which is what leaving --%s out means)", v.name, s, v.follows, v.name))
		}
		v.set, *v.off = false, false
		return nil
	}
	v.set = true
	// A YAML file's unquoted off reads as false.
	if strings.EqualFold(s, "off") || s == "false" {
		*v.off = true
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration or off: %w", err)
	}
	if d < 0 {
		v.note(fmt.Sprintf("--%s %s: a negative value is deprecated, give --%s off", v.name, s, v.name))
		*v.off = true
		return nil
	}
	*v.d, *v.off = d, false
	return nil
}

// limitInt is a count flag that also takes "unlimited".
type limitInt struct {
	n         *int
	unlimited *bool
	name      string
	note      func(string)
}

func (v *limitInt) String() string {
	if *v.unlimited {
		return "unlimited"
	}
	return strconv.Itoa(*v.n)
}

func (v *limitInt) Type() string { return "int" }

func (v *limitInt) Set(s string) error {
	if strings.EqualFold(s, "unlimited") {
		*v.unlimited = true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want a number or unlimited: %w", err)
	}
	if n < 0 {
		v.note(fmt.Sprintf("--%s %s: a negative value is deprecated, give --%s unlimited", v.name, s, v.name))
		*v.unlimited = true
		return nil
	}
	*v.n, *v.unlimited = n, false
	return nil
}

// limitFloat is a rate flag that also takes "unlimited".
type limitFloat struct {
	r         *float64
	unlimited *bool
	name      string
	note      func(string)
}

func (v *limitFloat) String() string {
	if *v.unlimited {
		return "unlimited"
	}
	return strconv.FormatFloat(*v.r, 'g', -1, 64)
}

func (v *limitFloat) Type() string { return "float64" }

func (v *limitFloat) Set(s string) error {
	if strings.EqualFold(s, "unlimited") {
		*v.unlimited = true
		return nil
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("want a number or unlimited: %w", err)
	}
	if r < 0 && !math.IsInf(r, -1) {
		v.note(fmt.Sprintf("--%s %s: a negative value is deprecated, give --%s unlimited", v.name, s, v.name))
		*v.unlimited = true
		return nil
	}
	*v.r, *v.unlimited = r, false
	return nil
}
