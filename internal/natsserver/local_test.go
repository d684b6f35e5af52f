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

func start(t *testing.T, o natsserver.Options) string {
	t.Helper()
	o.DataDir = t.TempDir()
	s, err := natsserver.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	u, ok := natsserver.LocalURL(s)
	if !ok {
		return ""
	}
	return u
}

// The roles of a process reach its embedded server over loopback TCP, at
// the port it picked, also when it listens on every address.
func TestLocalURLIsLoopback(t *testing.T) {
	for _, listen := range []string{"", "127.0.0.1:0", "0.0.0.0:0"} {
		t.Run(listen, func(t *testing.T) {
			raw := start(t, natsserver.Options{Listen: listen})
			if raw == "" {
				t.Fatal("no local URL for a plain listener")
			}
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if u.Scheme != "nats" || u.Hostname() != "127.0.0.1" || u.Port() == "0" || u.Port() == "-1" {
				t.Fatalf("local URL %s: want nats://127.0.0.1:<the port picked>", raw)
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

// A listener that requires TLS is not reached over plain TCP: the caller
// keeps the in-process connection.
func TestLocalURLNotForTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	conf := filepath.Join(dir, "nats.conf")
	body := "tls {\n  cert_file: \"" + cert + "\"\n  key_file: \"" + key + "\"\n}\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if raw := start(t, natsserver.Options{ConfigFile: conf}); raw != "" {
		t.Fatalf("local URL %s for a TLS listener; want none", raw)
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
