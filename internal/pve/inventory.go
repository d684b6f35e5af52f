package pve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"

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
	var raw json.RawMessage
	var res []Resource
	err := c.doWith(ctx, OpInventory, GuestRef{}, http.MethodGet, "/cluster/resources?type=vm", nil, func(b []byte) (err error) {
		var ok bool
		if res, ok = decodeInventory(b, pace.Default(ctx)); !ok {
			raw, err = envelopeData(b)
		}
		return err
	})
	if err != nil || res != nil {
		return res, err
	}
	res, err = DecodeResources(raw)
	if err != nil {
		return nil, &Error{Class: ClassUnknown, Op: OpInventory, Message: err.Error(), Err: err}
	}
	return res, nil
}

// decodeInventory reads an inventory answer ({"data":[rows…]}) row by row
// (scanInventory, or where it declines encoding/json's streaming decoder),
// checking the JSON as strictly as go-proxmox would, paced by p (package pace; nil: not paced). An
// inventory of 10,000 guests is tens of milliseconds of CPU every pass;
// done in one piece it held a processor while the executors waited for
// one (on two cores, a burst of changes at 10–50 ms instead of under
// 1 ms). ok is false for any answer of another shape, which the general path
// (envelopeData, DecodeResources) then reads and reports as before; when
// ok, the result is what that path returns.
func decodeInventory(body []byte, p *pace.Pacer) (out []Resource, ok bool) {
	if out, ok := scanInventory(body, p); ok {
		return out, true
	}
	return decodeInventoryStream(body, p)
}

// decodeInventoryStream is decodeInventory for the answers scanInventory
// declines.
func decodeInventoryStream(body []byte, p *pace.Pacer) (out []Resource, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	seen := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		if t != "data" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil, false
			}
			continue
		}
		if seen { // a repeated member: the last one wins, left to the general path
			return nil, false
		}
		seen = true
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, false
		}
		out = []Resource{}
		for dec.More() {
			p.Step()
			var row resourceRow
			if dec.Decode(&row) != nil {
				return nil, false
			}
			if out, ok = appendRow(out, &row); !ok {
				return nil, false
			}
		}
		if t, err := dec.Token(); err != nil || t != json.Delim(']') {
			return nil, false
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') || !seen {
		return nil, false
	}
	// One value and nothing after it but white space, as json.Unmarshal.
	if len(bytes.Trim(body[dec.InputOffset():], " \t\r\n")) != 0 {
		return nil, false
	}
	sortResources(out)
	return out, true
}

func sortResources(out []Resource) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].VMID != out[j].VMID {
			return out[i].VMID < out[j].VMID
		}
		return out[i].Node < out[j].Node
	})
}

// DecodeResources decodes the data of GET /cluster/resources (any type
// filter); entries that are not guests are skipped. It is exported for tests
// over captured payloads.
func DecodeResources(data []byte) ([]Resource, error) {
	if isNull(data) {
		return []Resource{}, nil
	}
	if out, ok := decodeResourcesTyped(data); ok {
		return out, nil
	}
	var items []map[string]any
	if err := unmarshalNumber(data, &items); err != nil {
		return nil, fmt.Errorf("decode cluster resources: %w", err)
	}
	out := make([]Resource, 0, len(items))
	for i, it := range items {
		kind := Kind(str(it["type"]))
		if !kind.Valid() {
			continue
		}
		r, err := decodeResource(kind, it)
		if err != nil {
			return nil, fmt.Errorf("cluster resources entry %d (%v): %w", i, it["id"], err)
		}
		out = append(out, r)
	}
	sortResources(out)
	return out, nil
}

// resourceRow is the typed shape of a guest row. Decoding into it skips
// the dozen fields converge ignores, which a generic map would allocate;
// numbers stay raw so that PVE's mixed typing (strings, scientific
// notation) is read by the same tolerant parsers as the slow path.
type resourceRow struct {
	Type     string          `json:"type"`
	Node     string          `json:"node"`
	Name     string          `json:"name"`
	Status   string          `json:"status"`
	Lock     string          `json:"lock"`
	Tags     string          `json:"tags"`
	HAState  string          `json:"hastate"`
	Pool     string          `json:"pool"`
	VMID     json.RawMessage `json:"vmid"`
	Template json.RawMessage `json:"template"`
	MaxCPU   json.RawMessage `json:"maxcpu"`
	MaxMem   json.RawMessage `json:"maxmem"`
	Uptime   json.RawMessage `json:"uptime"`
}

// rawValue turns a raw JSON scalar into what the generic decoder would
// have produced (json.Number, string, bool or nil).
func rawValue(r json.RawMessage) any {
	switch {
	case len(r) == 0 || string(r) == "null":
		return nil
	case r[0] == '"':
		s, err := strconv.Unquote(string(r))
		if err != nil {
			return nil
		}
		return s
	case string(r) == "true":
		return true
	case string(r) == "false":
		return false
	}
	return json.Number(r)
}

// decodeResourcesTyped is the fast path of DecodeResources; ok is false
// when the payload does not fit the typed shape (then the generic path
// decides and reports).
func decodeResourcesTyped(data []byte) ([]Resource, bool) {
	rows, err := decodeRows(data)
	if err != nil {
		return nil, false
	}
	out := make([]Resource, 0, len(rows))
	for _, row := range rows {
		var ok bool
		if out, ok = appendRow(out, &row); !ok {
			return nil, false
		}
	}
	sortResources(out)
	return out, true
}

// decodeRows decodes rows with goccy/go-json, which reads them as
// encoding/json does (TestDecodeRowsMatchesStd) in a third of the CPU,
// except that it keeps invalid UTF-8 where encoding/json substitutes
// U+FFFD: such a payload is left to encoding/json.
func decodeRows(data []byte) (rows []resourceRow, err error) {
	// goccy's decoder was found to read past some malformed bodies
	// (events.Decode): a panic declines the fast path, never crashes.
	defer func() {
		if r := recover(); r != nil {
			rows, err = nil, fmt.Errorf("malformed JSON (%v)", r)
		}
	}()
	unmarshal := gojson.Unmarshal
	if !utf8.Valid(data) {
		unmarshal = json.Unmarshal
	}
	err = unmarshal(data, &rows)
	return rows, err
}

// appendRow appends the guest of a typed row to out, as both typed paths
// (decodeInventory, decodeResourcesTyped) read a row: a row that is not a
// guest is skipped; ok is false when a guest row does not decode.
func appendRow(out []Resource, row *resourceRow) (_ []Resource, ok bool) {
	kind := Kind(row.Type)
	if !kind.Valid() {
		return out, true
	}
	r, err := decodeRow(kind, row)
	if err != nil {
		return nil, false
	}
	return append(out, r), true
}

// decodeRow reads a typed row with the same rules as decodeResource.
func decodeRow(kind Kind, row *resourceRow) (Resource, error) {
	r := Resource{Kind: kind, Node: row.Node, Name: row.Name, Status: row.Status, Lock: row.Lock,
		Tags: events.ParseTags(row.Tags), HAState: row.HAState, Pool: row.Pool}
	vmid, err := ParseInt(rawValue(row.VMID))
	if err != nil {
		return r, err
	}
	r.VMID = int(vmid)
	if r.Template, err = ParseBool(rawValue(row.Template)); err != nil {
		return r, err
	}
	if v := rawValue(row.MaxCPU); v != nil {
		f, err := ParseFloat(v)
		if err != nil {
			return r, err
		}
		r.MaxCPU = int(math.Ceil(f))
	}
	if v := rawValue(row.MaxMem); v != nil {
		f, err := ParseFloat(v)
		if err != nil {
			return r, err
		}
		r.MaxMemMiB = int64(f) / (1 << 20)
	}
	if v := rawValue(row.Uptime); v != nil {
		f, err := ParseFloat(v)
		if err != nil {
			return r, err
		}
		r.Uptime = int64(f)
	}
	return r, nil
}

func decodeResource(kind Kind, it map[string]any) (Resource, error) {
	r := Resource{
		Kind:    kind,
		Node:    str(it["node"]),
		Name:    str(it["name"]),
		Status:  str(it["status"]),
		Lock:    str(it["lock"]),
		Tags:    events.ParseTags(str(it["tags"])),
		HAState: str(it["hastate"]),
		Pool:    str(it["pool"]),
	}
	vmid, err := ParseInt(it["vmid"])
	if err != nil {
		return r, fmt.Errorf("vmid: %w", err)
	}
	r.VMID = int(vmid)
	if r.Template, err = ParseBool(it["template"]); err != nil {
		return r, fmt.Errorf("template: %w", err)
	}
	if v, ok := it["maxcpu"]; ok && v != nil {
		f, err := ParseFloat(v)
		if err != nil {
			return r, fmt.Errorf("maxcpu: %w", err)
		}
		r.MaxCPU = int(math.Ceil(f))
	}
	if v, ok := it["maxmem"]; ok && v != nil {
		f, err := ParseFloat(v) // bytes, may be scientific notation
		if err != nil {
			return r, fmt.Errorf("maxmem: %w", err)
		}
		r.MaxMemMiB = int64(f) / (1 << 20)
	}
	if v, ok := it["uptime"]; ok && v != nil {
		f, err := ParseFloat(v)
		if err != nil {
			return r, fmt.Errorf("uptime: %w", err)
		}
		r.Uptime = int64(f)
	}
	return r, nil
}

// str renders a decoded JSON value as a string; absent and null are "".
func str(v any) string {
	s, _ := valueString(v)
	return s
}

// isNull reports an absent or JSON-null "data" (go-proxmox leaves the
// RawMessage empty for null).
func isNull(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) == 0 || string(t) == "null"
}
