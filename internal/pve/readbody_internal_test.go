package pve

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// readBody returns the body as sent, whether the answer carries its length
// (read in one allocation) or is chunked (read as it comes), and fails on
// an answer shorter than its Content-Length.
func TestReadBody(t *testing.T) {
	body := bytes.Repeat([]byte(`{"data":{"k":"v"}}`), 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Write(body[:10])
			w.(http.Flusher).Flush() // no Content-Length from here on
			w.Write(body[10:])
		case "/short":
			w.Header().Set("Content-Length", "5000")
			w.Write(body[:100])
		default:
			w.Write(body)
		}
	}))
	defer srv.Close()
	for _, path := range []string{"/sized", "/chunked", "/short"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readBody(res)
		res.Body.Close()
		switch {
		case path == "/short":
			if err == nil {
				t.Errorf("%s: read %d bytes of a 5000-byte answer without an error", path, len(got))
			}
		case err != nil || !bytes.Equal(got, body):
			t.Errorf("%s (Content-Length %d): %d bytes, %v; want the %d sent", path, res.ContentLength, len(got), err, len(body))
		case path == "/sized" && res.ContentLength != int64(len(body)):
			t.Errorf("/sized answered without its length (%d): the sized read is not tested", res.ContentLength)
		}
	}
	// One allocation for a sized answer.
	r := bytes.NewReader(body)
	res := &http.Response{ContentLength: int64(len(body)), Body: io.NopCloser(r)}
	if n := testing.AllocsPerRun(10, func() {
		r.Reset(body)
		if _, err := readBody(res); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("%.0f allocations reading a sized answer; want 1", n)
	}
}
