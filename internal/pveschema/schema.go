package pveschema

import (
	"strings"
	"sync"
)

// Operation is one HTTP method on one path template of Proxmox's API.
type Operation struct {
	Method string
	Path   string // template, e.g. /nodes/{node}/qemu/{vmid}/config
	// AdditionalProperties: undeclared parameters are accepted.
	AdditionalProperties bool
	Params               []Param // sorted by Name; path parameters included
}

// Param is a parameter of an operation, or a key of a property string.
type Param struct {
	Name     string // indexed keys as declared: "net[n]"
	Type     string // string, integer, number, boolean, array, object; "": unchecked
	Optional bool
	// IndexMax is the highest index of an indexed key where the schema
	// states it ("n is 0 to 30"); -1: any index.
	IndexMax             int
	Enum                 []string
	Min, Max             float64
	HasMin, HasMax       bool
	MinLength, MaxLength int // 0: no bound
	Pattern              string
	Format               string      // named format, e.g. pve-vmid
	Props                *PropString // the value is a property string with these keys
	Requires             string      // another parameter this one needs
	Items                *Param      // an array's elements

	// Property-string keys only.
	DefaultKey bool   // may stand bare, without "key="
	Alias      string // this key is another key's spelling
	KeyAlias   string // and its own name is stored under this key (a NIC's model)
}

// PropString is the format of a property string: key=value,… .
type PropString struct {
	Keys []Param // sorted by Name
}

// Operations returns the generated rules, sorted by path then method.
func Operations() []Operation { return operations }

// Lookup finds the operation a concrete request path falls under and the
// path parameters' values.
func Lookup(method, path string) (*Operation, map[string]string, bool) {
	segs := split(path)
	var best *Operation
	var bestSegs []string
	for _, o := range byMethod()[method] {
		t := split(o.Path)
		if len(t) != len(segs) || !matches(t, segs) {
			continue
		}
		if best == nil || moreLiteral(t, bestSegs) {
			best, bestSegs = o, t
		}
	}
	if best == nil {
		return nil, nil, false
	}
	vals := map[string]string{}
	for i, s := range bestSegs {
		if name, ok := pathParam(s); ok {
			vals[name] = segs[i]
		}
	}
	return best, vals, true
}

var byMethod = sync.OnceValue(func() map[string][]*Operation {
	m := map[string][]*Operation{}
	for i := range operations {
		o := &operations[i]
		m[o.Method] = append(m[o.Method], o)
	}
	return m
})

func split(p string) []string {
	return strings.Split(strings.Trim(p, "/"), "/")
}

func pathParam(seg string) (string, bool) {
	if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
		return seg[1 : len(seg)-1], true
	}
	return "", false
}

func matches(tmpl, segs []string) bool {
	for i, t := range tmpl {
		if _, ok := pathParam(t); ok {
			if segs[i] == "" {
				return false
			}
		} else if t != segs[i] {
			return false
		}
	}
	return true
}

// moreLiteral: at the first segment where the templates differ, a has the
// literal, so /tasks/{upid}/status is not taken for a {param}.
func moreLiteral(a, b []string) bool {
	for i := range a {
		_, pa := pathParam(a[i])
		_, pb := pathParam(b[i])
		if pa != pb {
			return !pa
		}
	}
	return false
}

// find returns the declared parameter a concrete name stands for: itself,
// or for "net0" the indexed "net[n]".
func find(params []Param, name string) *Param {
	for i := range params {
		if params[i].Name == name {
			return &params[i]
		}
	}
	base := strings.TrimRight(name, "0123456789")
	idx := name[len(base):]
	if base == "" || idx == "" || (len(idx) > 1 && idx[0] == '0') {
		return nil
	}
	for i := range params {
		if params[i].Name == base+"[n]" {
			p := &params[i]
			if p.IndexMax >= 0 && !indexAtMost(idx, p.IndexMax) {
				return nil
			}
			return p
		}
	}
	return nil
}

func indexAtMost(idx string, max int) bool {
	n := 0
	for _, c := range idx {
		n = n*10 + int(c-'0')
		if n > max {
			return false
		}
	}
	return true
}

// Param returns the declared parameter a concrete name stands for (itself,
// or "net0" for the indexed "net[n]"), nil if the operation declares none.
func (o *Operation) Param(name string) *Param { return find(o.Params, name) }
