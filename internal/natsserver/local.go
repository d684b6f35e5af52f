package natsserver

import (
	"net"
	"net/url"

	"github.com/nats-io/nats-server/v2/server"
)

// LocalURL is the URL at which a process reaches its own embedded server's
// client listener over loopback TCP, and false when it should not: the
// listener requires TLS (the roles would need the certificates it trusts;
// nats.go's in-process connection skips TLS) or is not listening.
//
// Loopback TCP is preferred to nats.go's in-process connection because
// that one is a net.Pipe: unbuffered, so every write of the server or the
// client waits until the other side's reader is scheduled and has read
// it. With both cores busy those hand-offs queue behind each other, and
// the pipeline's tail latency with them (converge bench on 2 cores, about
// 24 alternated runs each: p99 at 10,000 guests median 14.6 ms and worst
// 55.7 over the pipe, 8.7 and 28.5 over TCP, with the same CPU per action;
// docs/benchmarks.md); the kernel's socket buffers let each side write and
// go on.
func LocalURL(s *server.Server) (string, bool) {
	u, err := url.Parse(s.ClientURL())
	if err != nil || u.Scheme != "nats" {
		return "", false
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port == "" || port == "0" || port == "-1" {
		return "", false
	}
	// A listener on every address (0.0.0.0, ::) is reached on loopback.
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, port), true
}
