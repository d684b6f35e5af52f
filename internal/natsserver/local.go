package natsserver

import (
	"net"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
)

// LocalURL is the URL at which a process reaches the server it started
// with o over loopback TCP, and false when it should keep nats.go's
// in-process connection instead:
//   - o.ConfigFile is set: an operator's configuration may require TLS,
//     allow only in-process connections for a user
//     (allowed_connection_types), hand connections to an auth callout, or
//     join a cluster whose advertised URLs a TCP client would follow;
//   - o.Cluster is set, for the last reason;
//   - the listener is bound to a zoned (link-local) address, or is not
//     listening.
//
// The URL names the address the listener is bound to, never a host name:
// a name such as localhost can also resolve to an address the server does
// not listen on, where another local process could take the credentials.
// A listener on every address (0.0.0.0 or ::, dual-stack in Go) is reached
// at 127.0.0.1, which also works where IPv6 is disabled.
//
// Loopback TCP is preferred because nats.go's in-process connection is a
// net.Pipe: unbuffered, so every write of the server or the client waits
// until the other side's reader is scheduled and has read it. With both
// cores busy those hand-offs queue behind each other, and the pipeline's
// tail latency with them (converge bench on 2 cores, about 24 alternated
// runs each: p99 at 10,000 guests median 14.6 ms and worst 55.7 over the
// pipe, 8.7 and 28.5 over TCP, with the same CPU per action;
// docs/benchmarks.md); the kernel's socket buffers let each side write and
// go on.
func LocalURL(o Options, s *server.Server) (string, bool) {
	if o.ConfigFile != "" || o.Cluster != nil {
		return "", false
	}
	a, ok := s.Addr().(*net.TCPAddr)
	if !ok || a == nil || a.Port <= 0 || a.Zone != "" {
		return "", false
	}
	ip := a.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return "nats://" + net.JoinHostPort(ip.String(), strconv.Itoa(a.Port)), true
}
