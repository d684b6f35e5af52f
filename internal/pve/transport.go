package pve

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
)

// newWire builds the transport every request goes through: TLS verified
// against the system pool, a CA file or a pinned certificate fingerprint,
// HTTP/1.1 only (PVE's messages live in the reason phrase), and
// statusTransport, which keeps those messages and counts and times every
// request into m.
func newWire(cfg Config, m *requestMetrics) (*statusTransport, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("pve.Config.CAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("pve.Config.CAFile: %q holds no PEM certificate", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	if cfg.Fingerprint != "" {
		want, _ := hex.DecodeString(cfg.Fingerprint) // validated
		// The pin replaces chain verification only when no CA was given.
		tc.InsecureSkipVerify = cfg.CAFile == ""
		// VerifyConnection, unlike VerifyPeerCertificate, also runs on
		// resumed sessions.
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return &fingerprintMismatchError{}
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(got[:], want) != 1 {
				return &fingerprintMismatchError{got: hex.EncodeToString(got[:])}
			}
			return nil
		}
	}
	if cfg.Insecure {
		tc.InsecureSkipVerify = true
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256, // executors run many guests at once; redialling costs more than idling
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		// HTTP/1.1 only: pveproxy speaks it, and PVE's messages live in the
		// HTTP/1 reason phrase, which HTTP/2 does not have.
		ForceAttemptHTTP2: false,
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	return &statusTransport{base: tr, metrics: m, slots: newNodeSlots(cfg.NodeCalls)}, nil
}

// fingerprintMismatchError is returned when the pinned fingerprint does not
// match; it classifies as ClassUnauthorized.
type fingerprintMismatchError struct{ got string }

func (e *fingerprintMismatchError) Error() string {
	if e.got == "" {
		return "server presented no certificate to check the pinned fingerprint against"
	}
	return "server certificate fingerprint " + e.got + " does not match the pinned fingerprint"
}

// statusTransport sends every request (through an answerReader) and
// turns every non-2xx answer into a *statusError carrying the status code,
// PVE's reason phrase and the body's message: go-proxmox keeps only
// res.Status for 500s, drops the 400 error map's structure, and would
// decode the body of other codes (595, 404, 502 from a proxy) as a
// success — a {"data":null} 595 would otherwise read as "mutation
// completed synchronously".
//
// It is also where requests are counted and timed (converge_pve_requests_total,
// converge_pve_request_duration_seconds): every request passes here once,
// and its outcome, the body of a successful answer read, is known here as
// an answer or an error.
type statusTransport struct {
	base    http.RoundTripper
	metrics *requestMetrics // nil: not counted
	slots   *nodeSlots      // nil: no limit (Config.NodeCalls)
}

// exchange sends req and returns a successful answer with its whole body
// read (res.Body closed), or an error. (The caller holds the node's slot:
// Client.exchangeInSlot.)
func (t *statusTransport) exchange(req *http.Request) (res *http.Response, body []byte, err error) {
	start := time.Now()
	res, body, err = t.send(req)
	if t.metrics != nil {
		t.metrics.observe(req.Context(), req.Method, time.Since(start), err)
	}
	return res, body, err
}

func (t *statusTransport) send(req *http.Request) (*http.Response, []byte, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		body, err := readBody(res)
		if err != nil {
			return nil, nil, err
		}
		return res, body, nil
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	se := &statusError{
		Code:   res.StatusCode,
		Reason: strings.TrimSpace(strings.TrimPrefix(res.Status, strconv.Itoa(res.StatusCode))),
	}
	var env struct {
		Message Value            `json:"message"`
		Errors  map[string]Value `json:"errors"`
	}
	if json.Unmarshal(body, &env, readOpts) == nil {
		se.Body = strings.TrimSpace(env.Message.Text())
		if len(env.Errors) > 0 {
			se.Params = make(map[string]string, len(env.Errors))
			for k, v := range env.Errors {
				se.Params[k] = v.Text()
			}
		}
	} else if len(body) > 0 && len(body) < 512 && !strings.Contains(string(body), "<") {
		se.Body = strings.TrimSpace(string(body)) // short plain-text body, not an HTML error page
	}
	return nil, nil, se
}

func httpStatusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "HTTP " + strconv.Itoa(code)
}

// maxSizedBody bounds what readBody allocates up front on the word of a
// Content-Length header; a longer answer is read as it comes.
const maxSizedBody = 32 << 20

// readBody reads a successful answer's whole body: in one allocation of
// its length when the server sent one (pveproxy does), where io.ReadAll
// would grow its buffer from 512 bytes, allocating about twice the body.
func readBody(res *http.Response) ([]byte, error) {
	if n := res.ContentLength; n > 0 && n <= maxSizedBody {
		b := make([]byte, n)
		if _, err := io.ReadFull(res.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(res.Body)
}
