package natsserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/converge-pve/converge/internal/natsserver"
)

func start(t *testing.T, o natsserver.Options) (string, bool) {
	t.Helper()
	o.DataDir = t.TempDir()
	s, err := natsserver.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return natsserver.LocalURL(o, s)
}

// The roles of a process reach its embedded server over loopback TCP, at
// the address and port it is bound to: a listener on every address at
// 127.0.0.1, a host name as the address it resolved to (never the name,
// which can resolve to an address the server does not listen on).
func TestLocalURLIsTheBoundAddress(t *testing.T) {
	for _, listen := range []string{"", "127.0.0.1:0", "0.0.0.0:0", "[::]:0", "localhost:0"} {
		t.Run(listen, func(t *testing.T) {
			if listen == "[::]:0" {
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					t.Skipf("no IPv6 here: %v", err)
				}
				ln.Close()
			}
			raw, ok := start(t, natsserver.Options{Listen: listen})
			if !ok {
				t.Fatal("no local URL for a plain listener")
			}
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			ip := net.ParseIP(u.Hostname())
			if u.Scheme != "nats" || ip == nil || !ip.IsLoopback() || u.Port() == "" || u.Port() == "0" {
				t.Fatalf("local URL %s: want nats://<loopback IP>:<the port picked>", raw)
			}
			if listen != "localhost:0" && u.Hostname() != "127.0.0.1" {
				t.Fatalf("local URL %s: want 127.0.0.1", raw)
			}
			nc, err := nats.Connect(raw, nats.Timeout(5*time.Second))
			if err != nil {
				t.Fatalf("connect %s: %v", raw, err)
			}
			defer nc.Close()
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Where an operator's configuration or a cluster is in play, the caller
// keeps the in-process connection: the configuration may require TLS or
// admit a user only in-process, and a TCP client would follow a cluster's
// advertised URLs.
func TestLocalURLNotWithConfigOrCluster(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	tlsConf := filepath.Join(dir, "tls.conf")
	body := "tls {\n  cert_file: \"" + cert + "\"\n  key_file: \"" + key + "\"\n}\n"
	if err := os.WriteFile(tlsConf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	plainConf := filepath.Join(dir, "plain.conf")
	if err := os.WriteFile(plainConf, []byte("max_payload: 1048576\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, conf := range map[string]string{"tls": tlsConf, "plain": plainConf} {
		if raw, ok := start(t, natsserver.Options{ConfigFile: conf}); ok {
			t.Errorf("%s config: local URL %s; want none", name, raw)
		}
	}
	s, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if raw, ok := natsserver.LocalURL(natsserver.Options{Cluster: &natsserver.ClusterOptions{Name: "c"}}, s); ok {
		t.Errorf("cluster node: local URL %s; want none", raw)
	}
}

func writeCert(t *testing.T, dir string) (string, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
