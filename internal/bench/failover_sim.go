package bench

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// mutation is one mutating call the executors made: when the simulator
// received it and the HTTP status it answered (a call it refused, e.g. a
// config write whose digest no longer matches, took no effect).
type mutation struct {
	method, path string
	vmid, status int
	at           time.Time
}

// recordingFront serves the simulator's handler to the executors on a
// loopback address of its own, recording their mutating calls with the
// answer's status (pvesim.Options.OnMutation has no status).
type recordingFront struct {
	srv *http.Server
	url string
}

func startRecordingFront(sim *pvesim.Sim, record func(mutation)) (*recordingFront, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := sim.Handler()
	f := &recordingFront{url: "http://" + ln.Addr().String() + "/api2/json"}
	f.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As pvesim counts mutations (routes.go): any non-GET API call but
		// the login.
		if r.Method == http.MethodGet || !strings.HasPrefix(r.URL.Path, "/api2/json/") || r.URL.Path == "/api2/json/access/ticket" {
			h.ServeHTTP(w, r)
			return
		}
		m := mutation{method: r.Method, path: r.URL.Path, vmid: vmidOf(r.URL.Path), at: time.Now()}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.status = sw.status
		record(m)
	})}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

func (f *recordingFront) Close() error { return f.srv.Close() }

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// vmidOf is the guest a Proxmox API path names (…/qemu/<vmid>/… or
// …/lxc/<vmid>/…), 0 for none.
func vmidOf(path string) int {
	parts := strings.Split(path, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "qemu" || parts[i] == "lxc" {
			if n, err := strconv.Atoi(parts[i+1]); err == nil {
				return n
			}
		}
	}
	return 0
}
