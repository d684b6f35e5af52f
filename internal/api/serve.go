package api

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Limits bound what one client can hold of the server: 300 clients
// trickling request bodies once exhausted the process's file descriptors
// and took the embedded NATS down with the HTTP server.
type Limits struct {
	// ReadHeaderTimeout and ReadTimeout bound reading a request's headers
	// and whole request (a slow body is cut off); WriteTimeout writing
	// the answer; IdleTimeout a kept-alive connection between requests.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
	// MaxConns bounds open connections; more wait to be accepted.
	MaxConns int
}

// DefaultLimits are generous for API clients and scrapers, and far below
// what a process may hold: a body of at most 1 MiB on loopback or a LAN
// arrives in well under 30 s, and 128 connections leave the file
// descriptors of the default 1024 limit to NATS and Proxmox.
func DefaultLimits() Limits {
	return Limits{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, MaxConns: 128}
}

// Validate refuses limits that let nothing through, naming the field:
// start from DefaultLimits.
func (l Limits) Validate() error {
	const f = "api.Limits."
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ReadHeaderTimeout", l.ReadHeaderTimeout}, {"ReadTimeout", l.ReadTimeout}, {"WriteTimeout", l.WriteTimeout}, {"IdleTimeout", l.IdleTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf(f+"%s: must be > 0, got %s", d.name, d.v)
		}
	}
	switch {
	case l.MaxHeaderBytes < 1:
		return fmt.Errorf(f+"MaxHeaderBytes: must be >= 1, got %d", l.MaxHeaderBytes)
	case l.MaxConns < 1:
		return fmt.Errorf(f+"MaxConns: must be >= 1, got %d", l.MaxConns)
	}
	return nil
}

// Server is an http.Server for h within the limits.
func (l Limits) Server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes}
}

// Listener caps ln at MaxConns open connections.
func (l Limits) Listener(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, l.MaxConns)
}
