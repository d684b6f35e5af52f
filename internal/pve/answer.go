package pve

import "net/http"

// answerReader is the adapter go-proxmox v0.8.1 makes necessary. Its
// Client.Req decodes a successful answer twice with encoding/json (the
// envelope into a map, then the data into the caller's target), and has
// no way to hand the body over instead; at 10,000 guests an inventory read
// spent more CPU there than anywhere else. So each call gives go-proxmox
// an http.Client of its own (WithHTTPClient) whose transport is an
// answerReader: it sends the request through the Client's shared
// statusTransport and keeps the answer's body for the caller, and
// go-proxmox, asked for no result, reads an empty one.
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
