package pvesimtest

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// Call makes one raw API call to s as an operator would (over HTTP, with
// the token TokenID; form is the body of a POST or PUT, the query of
// other methods) and returns the status and the body. It fails the test
// only when no answer comes.
func Call(t testing.TB, s *pvesim.Sim, method, path string, form url.Values) (int, string) {
	t.Helper()
	u := s.URL() + path
	var body io.Reader
	if method == http.MethodPost || method == http.MethodPut {
		body = strings.NewReader(form.Encode())
	} else if len(form) > 0 {
		u += "?" + form.Encode()
	}
	req, err := http.NewRequestWithContext(Context(t), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "PVEAPIToken="+TokenID+"="+TokenSecret)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
