package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/go-json-experiment/json"
)

// body is a notice as the route's format has it.
func body(format string, n Notice) ([]byte, error) {
	if format == FormatSlack {
		return json.Marshal(struct {
			Text string `json:"text"`
		}{n.Text + "\nkey: " + n.Key})
	}
	return json.Marshal(n)
}

// errReceiver is a delivery the receiver refused or never answered.
var errReceiver = errors.New("delivery failed")

// deliver POSTs one notice to the route's receiver; any answer but 2xx
// is a failure, a redirect too (the client follows none). The URL and header values are never put in an error (a
// Slack URL is a credential).
func deliver(ctx context.Context, client *http.Client, r *Route, n Notice) error {
	b, err := body(r.Format, n)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%w: request: invalid URL", errReceiver)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "converge-notify")
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Idempotency-Key", n.Key)
	req.Header.Set("X-Converge-Key", n.Key)
	res, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return fmt.Errorf("%w: %w", errReceiver, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	if res.StatusCode/100 == 3 {
		// Named by host only: the rest of a URL may be a credential.
		host := "no Location"
		if loc, err := res.Location(); err == nil {
			host = "to host " + loc.Host
		}
		return fmt.Errorf("%w: receiver answered %s (a redirect, %s): redirects are not followed; configure the URL it redirects to", errReceiver, res.Status, host)
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%w: receiver answered %s", errReceiver, res.Status)
	}
	return nil
}
