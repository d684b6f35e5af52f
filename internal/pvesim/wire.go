package pvesim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/converge-pve/converge/internal/pace"
)

// apiError is an error answered the way pveproxy answers it.
type apiError struct {
	status int
	msg    string
	fields map[string]string // 400 parameter errors
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.status, e.msg) }

// fail500 is a Perl die: HTTP 500 with the message as reason phrase.
func fail500(format string, a ...any) error {
	return &apiError{status: 500, msg: fmt.Sprintf(format, a...)}
}

// paramErr is PVE's "Parameter verification failed." 400.
func paramErr(fields map[string]string) error {
	return &apiError{status: 400, msg: "Parameter verification failed.", fields: fields}
}

func paramErr1(field, format string, a ...any) error {
	return paramErr(map[string]string{field: fmt.Sprintf(format, a...)})
}

// withTotal is a response with a top-level "total" beside "data" (task log).
type withTotal struct {
	data  any
	total int
}

// req is one parsed API request.
type req struct {
	r      *http.Request
	params map[string]string // body merged with query; query wins, as in PVE
	user   string            // authenticated identity: user@realm or user@realm!token
}

func (q *req) path(name string) string { return q.r.PathValue(name) }

func (q *req) has(name string) bool { _, ok := q.params[name]; return ok }

func (q *req) str(name string) string { return q.params[name] }

// boolParam reads a PVE boolean parameter (0/1, JSON true/false): parseBool.
func (q *req) boolParam(name string) (bool, error) {
	v, ok := q.params[name]
	if !ok || v == "" {
		return false, nil
	}
	b, ok := parseBool(v)
	if !ok {
		return false, paramErr1(name, "type check ('boolean') failed - got '%s'", v)
	}
	return b, nil
}

func (q *req) intParam(name string, def int) (int, error) {
	v, ok := q.params[name]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, paramErr1(name, "type check ('integer') failed - got '%s'", v)
	}
	return n, nil
}

type apiFunc func(q *req) (any, error)

// parseParams merges a JSON or form body with the query string. JSON numbers
// and booleans become the strings PVE's schema checker would see.
func parseParams(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	if r.Body != nil && r.Method != http.MethodGet {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return nil, fail500("unable to read request body: %v", err)
		}
		body = bytes.TrimSpace(body)
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch {
		case len(body) == 0:
		case ct == "application/json" || (ct == "" && body[0] == '{'):
			if err := jsonParams(r.URL.Path, body, out); err != nil {
				return nil, err
			}
		default:
			vals, err := url.ParseQuery(string(body))
			if err != nil {
				return nil, paramErr1("body", "unable to parse form body - %v", err)
			}
			for k, v := range vals {
				s, err := multiParam(r.URL.Path, k, v, false)
				if err != nil {
					return nil, err
				}
				out[k] = s
			}
		}
	}
	// The query string wins over the body, as PVE merges them.
	for k, v := range r.URL.Query() {
		if k == "" {
			continue
		}
		s, err := multiParam(r.URL.Path, k, v, false)
		if err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, nil
}

// jsonParams reads a JSON body's members into out as the strings PVE's
// schema checker would see: numbers as written, booleans 1/0, arrays as
// multiple values, null left out. Only the first JSON value of the body
// is read, as encoding/json's Decoder read it.
func jsonParams(path string, body []byte, out map[string]string) error {
	var m map[string]jsontext.Value
	if err := json.UnmarshalDecode(jsontext.NewDecoder(bytes.NewReader(body), readOpts), &m, readOpts); err != nil {
		return paramErr1("body", "unable to parse JSON body - %v", err)
	}
	for k, v := range m {
		switch v.Kind() {
		case 'n':
		case '[':
			var elems []jsontext.Value
			if err := json.Unmarshal(v, &elems, readOpts); err != nil {
				return paramErr1(k, "unable to parse JSON body - %v", err)
			}
			vals := make([]string, len(elems))
			for i, e := range elems {
				vals[i] = elemString(e)
			}
			s, err := multiParam(path, k, vals, true)
			if err != nil {
				return err
			}
			out[k] = s
		case '"', '0':
			out[k] = elemString(v)
		case 't':
			out[k] = "1"
		case 'f':
			out[k] = "0"
		default: // an object: PVE::JSONSchema::check_type names Perl's reference type
			return paramErr1(k, "type check ('string') failed - got HASH")
		}
	}
	return nil
}

// elemString is a JSON value as a parameter's text: a string's contents,
// anything else as written (true, 1e3, null, …).
func elemString(v jsontext.Value) string {
	if v.Kind() == '"' {
		var s string
		if json.Unmarshal(v, &s, readOpts) == nil {
			return s
		}
	}
	return string(v)
}

// readOpts read request bodies as encoding/json did: the last of repeated
// members, invalid UTF-8 as U+FFFD.
var readOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// wireOpts encode every answer as the simulator always has, byte for byte
// what encoding/json wrote (TestEncodeGolden): object keys of a map
// sorted, <, >, &, U+2028 and U+2029 escaped, a nil slice or map as null,
// invalid UTF-8 as U+FFFD. JSON readers take either spelling; clients that
// compare answers byte for byte see none change. Names are not checked
// for duplicates: the simulator writes none, and checking costs time on
// every row of a long list.
var wireOpts = json.JoinOptions(
	json.Deterministic(true),
	jsontext.EscapeForHTML(true),
	jsontext.EscapeForJS(true),
	json.FormatNilSliceAsNull(true),
	json.FormatNilMapAsNull(true),
	jsontext.AllowInvalidUTF8(true),
	jsontext.AllowDuplicateNames(true),
)

// writeData answers 200 with PVE's envelope.
func writeData(w http.ResponseWriter, v any) {
	var b []byte
	var err error
	if wt, ok := v.(withTotal); ok {
		b, err = encodeData(map[string]any{"data": wt.data, "total": wt.total})
	} else if list, ok := v.([]any); ok && len(list) > longList {
		b, err = encodeList(list)
	} else {
		b, err = encodeEnvelope(v)
	}
	if err != nil {
		writeError(w, &apiError{status: 500, msg: "unable to encode response: " + err.Error()})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Cache-Control", "max-age=0")
	h.Set("Pragma", "no-cache")
	h.Set("Server", "pve-api-daemon/3.0")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// encodeData encodes an answer (wireOpts).
func encodeData(v any) ([]byte, error) { return json.Marshal(v, wireOpts) }

// encodeEnvelope encodes {"data":v} as encodeData encodes the map of that
// one member, without the map.
func encodeEnvelope(v any) ([]byte, error) {
	d, err := encodeData(v)
	if err != nil {
		return nil, err
	}
	return append(append(append(make([]byte, 0, len(d)+9), `{"data":`...), d...), '}'), nil
}

// longList is the length from which writeData encodes a list with
// encodeList.
const longList = 64

// encodeList encodes {"data":list} as encodeData does, one entry at a time,
// paced (package pace). The simulator stands in for a Proxmox host, which
// has CPUs of its own: encoding 10,000 inventory rows in one piece (about
// 10 ms) took a processor from the converge roles sharing this process,
// where a real host's answer would take none of theirs.
func encodeList(list []any) ([]byte, error) {
	p := pace.Default(context.Background())
	buf := bytes.NewBuffer(make([]byte, 0, 256*len(list)))
	enc := jsontext.NewEncoder(buf, wireOpts)
	for _, t := range []jsontext.Token{jsontext.BeginObject, jsontext.String("data"), jsontext.BeginArray} {
		if err := enc.WriteToken(t); err != nil {
			return nil, err
		}
	}
	for _, e := range list {
		p.Step()
		if err := json.MarshalEncode(enc, e, wireOpts); err != nil {
			return nil, err
		}
	}
	for _, t := range []jsontext.Token{jsontext.EndArray, jsontext.EndObject} {
		if err := enc.WriteToken(t); err != nil {
			return nil, err
		}
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil // the Encoder ends a top-level value with a newline
}

// writeError answers like pveproxy: the message in the status line's reason
// phrase and in the body, Connection: close. net/http always writes the
// canonical reason phrase, so the response is written on the hijacked
// connection.
func writeError(w http.ResponseWriter, e *apiError) {
	body := map[string]any{"data": nil, "message": e.msg + "\n"}
	if len(e.fields) > 0 {
		fields := map[string]string{}
		for k, v := range e.fields {
			fields[k] = v + "\n"
		}
		body["errors"] = fields
	}
	b, _ := encodeData(body)
	reason := strings.NewReplacer("\r", " ", "\n", " ").Replace(e.msg)
	hj, ok := w.(http.Hijacker)
	if !ok {
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		w.WriteHeader(e.status)
		_, _ = w.Write(b)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", e.status, reason)
	fmt.Fprintf(buf, "Content-Type: application/json;charset=UTF-8\r\nContent-Length: %d\r\n", len(b))
	fmt.Fprintf(buf, "Cache-Control: max-age=0\r\nPragma: no-cache\r\nServer: pve-api-daemon/3.0\r\n")
	fmt.Fprintf(buf, "Date: %s\r\nConnection: close\r\n\r\n", time.Now().UTC().Format(http.TimeFormat))
	_, _ = buf.Write(b)
	_ = buf.Flush()
}

// dropConnection closes the client's connection without a response: what a
// client sees when Proxmox is unreachable mid-request.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
