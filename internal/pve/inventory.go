package pve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pace"
)

// Resource is one guest as listed by GET /cluster/resources?type=vm.
//
// Name, Status, MaxCPU, MaxMemMiB and Uptime come from pvestatd's broadcast
// and lag up to ~10 s (a new guest may show Status "unknown" and no name);
// Lock and Tags are read live. MaxMemMiB and MaxCPU reflect the running
// (not pending) configuration.
type Resource struct {
	VMID      int
	Kind      Kind
	Node      string
	Name      string
	Status    string // running, stopped, unknown, …
	Template  bool
	Lock      string   // "" when unlocked
	Tags      []string // normalised set (events.ParseTags)
	MaxCPU    int      // rounded up for fractional LXC cpulimit
	MaxMemMiB int64
	Uptime    int64 // seconds
	HAState   string
	Pool      string
}

// Ref returns the address of the guest.
func (r Resource) Ref() GuestRef { return GuestRef{Kind: r.Kind, Node: r.Node, VMID: r.VMID} }

// Inventory lists every guest of the cluster with one call. The result is
// sorted by VMID.
func (c *Client) Inventory(ctx context.Context) ([]Resource, error) {
	var res []Resource
	err := c.do(ctx, OpInventory, GuestRef{}, http.MethodGet, "/cluster/resources?type=vm", nil, func(b []byte) (err error) {
		res, err = decodeInventory(b, pace.Default(ctx))
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// decodeInventory reads an inventory answer ({"data":[rows…]}) a row at a
// time off the answer's bytes, paced by p (package pace; nil: not paced).
// An inventory is some 15 ms of CPU every pass at 10,000 guests and 150 ms
// at 100,000 (BenchmarkInventoryDecode); done in one piece it held a
// processor while the executors waited for one.
func decodeInventory(body []byte, p *pace.Pacer) ([]Resource, error) {
	var out []Resource
	err := readAnswer(body, func(dec *jsontext.Decoder) (err error) {
		// Rows run to 300 bytes and more: room for every guest, once.
		out, err = readResources(dec, p, make([]Resource, 0, len(body)/300+1))
		return err
	})
	if err != nil {
		return nil, err
	}
	sortResources(out)
	return out, nil
}

// DecodeResources decodes the data of GET /cluster/resources (any type
// filter), as Inventory does; entries that are not guests are skipped. It
// is exported for tests over captured payloads.
func DecodeResources(data []byte) ([]Resource, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), readOpts)
	out, err := readResources(dec, nil, []Resource{})
	if err == nil {
		err = atEnd(dec)
	}
	if err != nil {
		return nil, err
	}
	sortResources(out)
	return out, nil
}

// resourceRow is the typed shape of a row: the members converge reads,
// any others skipped (the row's id too: type and vmid say it).
type resourceRow struct {
	Type, VMID, Node, Name, Status, Template, Lock, Tags, MaxCPU, MaxMem, Uptime, HAState, Pool Value

	// nodes are the node names rows read so far, kept across rows: every
	// guest's row names one of a few nodes, read again without allocating.
	nodes []string
}

// UnmarshalJSONFrom reads a row (null: an empty one). It matches the
// members itself: the general struct decoder looks every member up in a
// map, a fifth of an inventory's decoding.
func (row *resourceRow) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*row = resourceRow{nodes: row.nodes}
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '{':
	default:
		return fmt.Errorf("a row is not an object")
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() == '"' {
		// The name as written, unescaped only if it has escapes (Proxmox
		// writes none): read as a token, every name is checked for them.
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		name := []byte(raw[1 : len(raw)-1])
		if bytes.IndexByte(name, '\\') >= 0 {
			name, _ = jsontext.AppendUnquote(nil, raw)
		}
		var v *Value
		switch string(name) {
		case "type":
			v = &row.Type
		case "vmid":
			v = &row.VMID
		case "node":
			if err := row.readNode(dec); err != nil {
				return err
			}
			continue
		case "name":
			v = &row.Name
		case "status":
			v = &row.Status
		case "template":
			v = &row.Template
		case "lock":
			v = &row.Lock
		case "tags":
			v = &row.Tags
		case "maxcpu":
			v = &row.MaxCPU
		case "maxmem":
			v = &row.MaxMem
		case "uptime":
			v = &row.Uptime
		case "hastate":
			v = &row.HAState
		case "pool":
			v = &row.Pool
		default:
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if err := v.UnmarshalJSONFrom(dec); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken() // '}', or the syntax error
	return err
}

// readResources appends to out the guests of the rows array (or null) at
// dec, stepping p between rows.
func readResources(dec *jsontext.Decoder, p *pace.Pacer, out []Resource) ([]Resource, error) {
	switch dec.PeekKind() {
	case '[':
	case 'n':
		// Proxmox lists an empty cluster as []: a null is no answer, and
		// read as "no guests" it would report every guest gone.
		return nil, errors.New("cluster resources are null, not a list: not read as an empty cluster")
	default:
		return nil, fmt.Errorf("cluster resources are not a list")
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var row resourceRow // reused: UnmarshalJSONFrom clears it
	for i := 0; dec.PeekKind() != ']'; i++ {
		p.Step()
		if err := row.UnmarshalJSONFrom(dec); err != nil {
			return nil, fmt.Errorf("cluster resources entry %d: %w", i, err)
		}
		kind := Kind(row.Type.Text())
		if !kind.Valid() {
			continue
		}
		r, err := row.resource(kind)
		if err != nil {
			return nil, fmt.Errorf("cluster resources entry %d (%s %s): %w", i, kind, row.VMID, err)
		}
		out = append(out, r)
	}
	_, err := dec.ReadToken() // ']'
	return out, err
}

// resource reads a guest's row.
func (row *resourceRow) resource(kind Kind) (Resource, error) {
	r := Resource{Kind: kind, Node: row.Node.Text(), Name: row.Name.Text(), Status: row.Status.Text(), Lock: row.Lock.Text(),
		Tags: events.ParseTags(row.Tags.Text()), HAState: row.HAState.Text(), Pool: row.Pool.Text()}
	vmid, err := row.VMID.Int()
	if err != nil {
		return r, fmt.Errorf("vmid: %w", err)
	}
	r.VMID = int(vmid)
	if r.Template, err = row.Template.Bool(); err != nil {
		return r, fmt.Errorf("template: %w", err)
	}
	if !row.MaxCPU.IsNull() {
		f, err := row.MaxCPU.Float()
		if err != nil {
			return r, fmt.Errorf("maxcpu: %w", err)
		}
		r.MaxCPU = int(math.Ceil(f))
	}
	if !row.MaxMem.IsNull() {
		f, err := row.MaxMem.Float() // bytes, may be in scientific notation
		if err != nil {
			return r, fmt.Errorf("maxmem: %w", err)
		}
		r.MaxMemMiB = int64(f) / (1 << 20)
	}
	if !row.Uptime.IsNull() {
		f, err := row.Uptime.Float()
		if err != nil {
			return r, fmt.Errorf("uptime: %w", err)
		}
		r.Uptime = int64(f)
	}
	return r, nil
}

// readNode reads the node member, a name of row.nodes where it is one.
func (row *resourceRow) readNode(dec *jsontext.Decoder) error {
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	// Only a name written without escapes is compared raw: an escaped one
	// could equal a cached name that holds a backslash.
	if raw.Kind() == '"' && len(row.nodes) < 64 && bytes.IndexByte(raw, '\\') < 0 { // a cluster has few; a hostile answer gains nothing
		for _, n := range row.nodes {
			if len(raw) == len(n)+2 && string(raw[1:len(raw)-1]) == n {
				row.Node = Value{kind: kindString, text: n}
				return nil
			}
		}
	}
	row.Node = valueOf(raw)
	if row.Node.kind == kindString && len(row.nodes) < 64 {
		row.nodes = append(row.nodes, row.Node.text)
	}
	return nil
}

func sortResources(out []Resource) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].VMID != out[j].VMID {
			return out[i].VMID < out[j].VMID
		}
		return out[i].Node < out[j].Node
	})
}
