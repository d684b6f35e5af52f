package pve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// readOpts read every Proxmox answer. Unknown members are skipped (the
// decoder's default), so a newer Proxmox that adds some never breaks a
// read. A member given twice keeps its last value and invalid UTF-8 in a
// string becomes U+FFFD, as encoding/json (and so go-proxmox) read them:
// Proxmox writes neither, but a read that used to work keeps working.
var readOpts = json.JoinOptions(
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
)

// writeOpts encode request bodies: keys in order, so that a request reads
// the same in every log and test; invalid UTF-8 in a value sent as U+FFFD,
// as encoding/json sent it, rather than refusing the call.
var writeOpts = json.JoinOptions(
	json.Deterministic(true),
	jsontext.AllowInvalidUTF8(true),
)

// answerReader is the adapter go-proxmox v0.8.1 makes necessary. Its
// Client.Req decodes a successful answer twice with encoding/json (the
// envelope into a map, then the data into the caller's target), and has
// no way to hand the body over instead; at 10,000 guests an inventory read
// spent more CPU there than anywhere else. So each call gives go-proxmox
// an http.Client of its own (WithHTTPClient) whose transport is an
// answerReader: it sends the request through the Client's shared
// statusTransport and keeps the answer's body for the caller, and
// go-proxmox, asked for no result, reads an empty one. It deliberately
// bends the RoundTripper rule "a response is not an error": a non-2xx
// answer comes back as statusTransport's *statusError, which go-proxmox
// passes on as it is (see statusTransport for why).
//
// go-proxmox still builds and authenticates every request and runs the
// interceptors. If its Req accepted a target that takes the raw answer
// (an io.Writer, or a type of its own the body is handed to instead of
// being decoded), this type and the per-call clients would go.
type answerReader struct {
	wire *statusTransport
	body []byte // the successful answer's body
}

func (a *answerReader) RoundTrip(req *http.Request) (*http.Response, error) {
	res, body, err := a.wire.exchange(req)
	if err != nil {
		return nil, err
	}
	a.body = body
	res.Body = http.NoBody
	return res, nil
}

var (
	errNotObject = errors.New("answer is not a JSON object")
	errEmpty     = errors.New("answer is empty")
)

// readAnswer reads a successful answer, {"data": …} (pveproxy's envelope;
// other members, such as a task log's "total", are skipped), calling data
// with dec at the data member's value, which data must read whole. A
// repeated data member is read again: the last one counts, data resets
// what it reads. An object without a data member is the data itself (as
// go-proxmox reads it); null has null data. Anything after the answer
// but white space is an error.
func readAnswer(body []byte, data func(dec *jsontext.Decoder) error) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), readOpts) // a bytes.Buffer is read in place
	switch dec.PeekKind() {
	case 'n':
		if err := data(dec); err != nil {
			return err
		}
		return atEnd(dec)
	case '{':
	case 0: // empty, or malformed: the error is the read's
		if _, err := dec.ReadToken(); err != io.EOF {
			return err
		}
		return errEmpty
	default:
		return errNotObject
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	found := false
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if name.String() != "data" {
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		found = true
		if err := data(dec); err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil { // '}', or the syntax error
		return err
	}
	if err := atEnd(dec); err != nil {
		return err
	}
	if !found {
		return data(jsontext.NewDecoder(bytes.NewBuffer(body), readOpts))
	}
	return nil
}

// atEnd checks that nothing but white space follows the answer.
func atEnd(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("answer has more than one JSON value")
		}
		return err
	}
	return nil
}

// call is do for an answer whose data decodes into a T (decodeAnswer).
func call[T any](ctx context.Context, c *Client, op Op, ref GuestRef, method, path string, body any) (T, error) {
	var out T
	err := c.do(ctx, op, ref, method, path, body, func(b []byte) (err error) {
		out, err = decodeAnswer[T](b)
		return err
	})
	return out, err
}

// discardAnswer checks an answer whose data the caller does not need.
func discardAnswer(body []byte) error {
	return readAnswer(body, (*jsontext.Decoder).SkipValue)
}

// decodeAnswer decodes a successful answer's data into a new T; null
// data leaves T's zero value (nil for a pointer or slice).
func decodeAnswer[T any](body []byte) (T, error) {
	var out T
	err := readAnswer(body, func(dec *jsontext.Decoder) error {
		out = *new(T)
		return json.UnmarshalDecode(dec, &out, readOpts)
	})
	return out, err
}

// decodeData decodes the data of an answer (no envelope) into a new T;
// empty or null data leaves T's zero value.
func decodeData[T any](data []byte) (T, error) {
	var out T
	if isNull(data) {
		return out, nil
	}
	err := json.Unmarshal(data, &out, readOpts)
	return out, err
}

// isNull reports absent (empty) or JSON-null data.
func isNull(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) == 0 || string(t) == "null"
}
