package events_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

// TestEveryFieldSurvivesTheJournal: every exported field of the journal's
// event types, recursively, filled with a value of its own by reflection,
// comes back from events.Encode → events.Decode unchanged. A field added
// to a type and forgotten by a decoder fails here, whatever the hand
// written tests name (the contract: fields are only ever added). A field
// of a kind the filler does not know fails too, so nothing is skipped
// silently.
func TestEveryFieldSurvivesTheJournal(t *testing.T) {
	for _, v := range []any{&events.Observed{}, &events.Heartbeat{}, &events.Action{}, &events.Result{}, &events.Control{}, &events.Addresses{}} {
		typ := reflect.TypeOf(v).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			f := &filler{t: t}
			f.fill(reflect.ValueOf(v).Elem(), typ.Name())
			body, err := events.Encode(v)
			if err != nil {
				t.Fatal(err)
			}
			got := reflect.New(typ)
			switch typ.Name() {
			case "Observed":
				d, err := events.Decode[events.Observed](body)
				got.Elem().Set(reflect.ValueOf(d))
				check(t, err)
			case "Heartbeat":
				d, err := events.Decode[events.Heartbeat](body)
				got.Elem().Set(reflect.ValueOf(d))
				check(t, err)
			case "Action":
				d, err := events.Decode[events.Action](body)
				got.Elem().Set(reflect.ValueOf(d))
				check(t, err)
			case "Result":
				d, err := events.Decode[events.Result](body)
				got.Elem().Set(reflect.ValueOf(d))
				check(t, err)
			case "Control":
				d, err := events.Decode[events.Control](body)
				got.Elem().Set(reflect.ValueOf(d))
				check(t, err)
			case "Addresses":
				d, err := events.Decode[events.Addresses](body)
				got.Elem().Set(reflect.ValueOf(d))
				check(t, err)
			}
			if diff := differ(reflect.ValueOf(v).Elem(), got.Elem(), typ.Name()); diff != "" {
				t.Errorf("lost on the way through the journal: %s\n%s", diff, body)
			}
			if f.filled < 5 {
				t.Fatalf("filled only %d fields", f.filled)
			}
		})
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// filler gives every settable field a value of its own, derived from its
// path, so that two fields never hold the same value by chance.
type filler struct {
	t      *testing.T
	n      int
	filled int
	// tricky fills strings with what encoders escape differently: HTML
	// characters, U+2028, control characters, invalid UTF-8, U+FFFD.
	tricky bool
}

func (f *filler) fill(v reflect.Value, path string) {
	f.n++
	switch v.Type() {
	case reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(time.Date(2030, 1, 2, 3, 4, 5, f.n*1000, time.UTC)))
		f.filled++
		return
	case reflect.TypeOf(time.Duration(0)):
		v.SetInt(int64(f.n) * int64(time.Millisecond))
		f.filled++
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() || sf.Tag.Get("json") == "-" {
				continue
			}
			f.fill(v.Field(i), path+"."+sf.Name)
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), path)
		v.Set(p)
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", strings.ToLower(strings.ReplaceAll(path, ".", "-")), f.n))
		if f.tricky {
			v.SetString(fmt.Sprintf("%d \"<&>\\ \u2028\u2029 \x01\n\ufffd \xff\xed\xa0\x80 é/%s", f.n, v.String()))
		}
		f.filled++
	case reflect.Bool:
		v.SetBool(true)
		f.filled++
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(100 + f.n))
		f.filled++
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(100 + f.n))
		f.filled++
	case reflect.Float64:
		v.SetFloat(float64(f.n) + 0.5)
		f.filled++
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		f.fill(s.Index(0), path+"[0]")
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		f.fill(k, path+"{key}")
		e := reflect.New(v.Type().Elem()).Elem()
		f.fill(e, path+"{value}")
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		f.t.Fatalf("%s: the filler does not know %s fields: teach it, so the field is checked", path, v.Kind())
	}
}

// differ names the first field where got differs from want, "" if none.
func differ(want, got reflect.Value, path string) string {
	if want.Type() == reflect.TypeOf(time.Time{}) {
		if !want.Interface().(time.Time).Equal(got.Interface().(time.Time)) {
			return fmt.Sprintf("%s: %v, want %v", path, got.Interface(), want.Interface())
		}
		return ""
	}
	switch want.Kind() {
	case reflect.Struct:
		for i := range want.NumField() {
			if !want.Type().Field(i).IsExported() {
				continue
			}
			if d := differ(want.Field(i), got.Field(i), path+"."+want.Type().Field(i).Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Pointer:
		if got.IsNil() != want.IsNil() {
			return fmt.Sprintf("%s: nil %v, want nil %v", path, got.IsNil(), want.IsNil())
		}
		if want.IsNil() {
			return ""
		}
		return differ(want.Elem(), got.Elem(), path)
	}
	if !reflect.DeepEqual(want.Interface(), got.Interface()) {
		return fmt.Sprintf("%s: %#v, want %#v", path, got.Interface(), want.Interface())
	}
	return ""
}
