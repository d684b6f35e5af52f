package events

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

const (
	testRSAKey     = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7+/x9= alice@laptop"
	testEd25519Key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bob (work)"
)

func TestEncodeSSHKeys(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{nil, ""},
		{[]string{"", "  "}, ""},
		// As the GUI's encodeURIComponent (www/manager6/qemu/SSHKey.js)
		// writes them: '+', '/', '=', '@', ' ', '\n' escaped, "()" not.
		{[]string{testRSAKey}, "ssh-rsa%20AAAAB3NzaC1yc2EAAAADAQABAAABAQC7%2B%2Fx9%3D%20alice%40laptop"},
		{[]string{" " + testRSAKey + "\r\n", testEd25519Key}, "ssh-rsa%20AAAAB3NzaC1yc2EAAAADAQABAAABAQC7%2B%2Fx9%3D%20alice%40laptop%0Assh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl%20bob%20(work)"},
		// One argument holding several lines (an authorized_keys file).
		{[]string{"k1\r\n\r\nk2\n"}, "k1%0Ak2"},
		{[]string{"ключ ü"}, "%D0%BA%D0%BB%D1%8E%D1%87%20%C3%BC"},
	} {
		if got := EncodeSSHKeys(tc.keys); got != tc.want {
			t.Errorf("EncodeSSHKeys(%q) = %q, want %q", tc.keys, got, tc.want)
		}
	}
}

func TestDecodeSSHKeys(t *testing.T) {
	both := []string{testRSAKey, testEd25519Key}
	// bpg/terraform-provider-proxmox (d6bd1ffe) proxmox/nodes/vms/
	// custom_cloud_init.go: url.QueryEscape with "+" as "%20".
	bpg := strings.ReplaceAll(url.QueryEscape(strings.Join(both, "\n")), "+", "%20")
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"%0A%0A", nil},
		{EncodeSSHKeys(both), both},
		{bpg, both},
		// The GUI does not trim (its trim() result is discarded): a
		// trailing newline, CRLF from a Windows paste.
		{"ssh-ed25519%20AAAA%20a%0D%0Assh-rsa%20BBBB%20b%0D%0A", []string{"ssh-ed25519 AAAA a", "ssh-rsa BBBB b"}},
		// uri_unescape: lower-case hex decodes, a stray '%' stays.
		{"a%2fb%zz%4", []string{"a/b%zz%4"}},
	} {
		got, err := DecodeSSHKeys(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("DecodeSSHKeys(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if n, err := NormaliseSSHKeys(bpg); err != nil || n != EncodeSSHKeys(both) {
		t.Errorf("NormaliseSSHKeys(bpg's encoding) = %q, %v", n, err)
	}
	// Proxmox refuses these (pve_verify_urlencoded): raw keys, '+'.
	for _, bad := range []string{testRSAKey, "AAAA+BBBB", "a\nb"} {
		if _, err := DecodeSSHKeys(bad); err == nil || !strings.Contains(err.Error(), "not allowed in a URL-encoded value") {
			t.Errorf("DecodeSSHKeys(%q) error = %v", bad, err)
		}
		if _, err := NormaliseSSHKeys(bad); err == nil {
			t.Errorf("NormaliseSSHKeys(%q) accepted", bad)
		}
	}
}

func TestNormaliseIPConfig(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"ip=dhcp", "ip=dhcp"},
		{"ip6=auto", "ip6=auto"},
		{"ip=dhcp,ip6=dhcp", "ip=dhcp,ip6=dhcp"}, // qemu-server src/test cfg2cmd
		{"ip6=dhcp", "ip6=dhcp"},                 // qemu-server src/test cfg2cmd
		// The GUI's order (ip, gw) and bpg's (gw, ip) normalise alike.
		{"ip=10.0.0.5/24,gw=10.0.0.1", "gw=10.0.0.1,ip=10.0.0.5/24"},
		{"gw=10.0.0.1,ip=10.0.0.5/24", "gw=10.0.0.1,ip=10.0.0.5/24"},
		{" ip = 10.0.0.5/24 ,, gw=10.0.0.1 ", "gw=10.0.0.1,ip=10.0.0.5/24"},
		{"ip=manual,gw=10.0.0.1", "gw=10.0.0.1,ip=manual"},
		{"ip=192.168.1.10/24,gw=192.168.1.1,ip6=2001:DB8:0:0::10/64,gw6=2001:db8::1", "gw=192.168.1.1,gw6=2001:db8::1,ip=192.168.1.10/24,ip6=2001:db8::10/64"},
		{"ip6=auto,ip=dhcp", "ip=dhcp,ip6=auto"},
	} {
		got, err := NormaliseIPConfig(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormaliseIPConfig(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"dhcp", "has no key"},
		{"ip=DHCP", "not dhcp, manual or an IPv4 CIDR"},
		{"ip=10.0.0.5", "not dhcp, manual or an IPv4 CIDR"},
		{"ip=10.0.0.5/4", "not dhcp, manual or an IPv4 CIDR"},
		{"ip=2001:db8::5/64", "IPv4 CIDR"},
		{"ip6=10.0.0.5/24", "IPv6 CIDR"},
		{"ip=10.0.0.5/24,gw=10.0.0.256", "not an IPv4 address"},
		{"ip6=2001:db8::5/64,gw6=10.0.0.1", "not an IPv6 address"},
		{"gw=10.0.0.1", "gw needs ip"},
		{"ip6=auto,gw=10.0.0.1", "gw needs ip"},
		{"ip=dhcp,gw=10.0.0.1", "gw with ip=dhcp"},
		{"gw6=fe80::1", "gw6 needs ip6"},
		{"ip6=auto,gw6=fe80::1", "gw6 with ip6=auto"},
		{"ip=dhcp,mask=24", `unknown key "mask"`},
		{"ip=dhcp,ip=manual", "duplicate key"},
	} {
		_, err := NormaliseIPConfig(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("NormaliseIPConfig(%q) error = %v, want one containing %q", tc.in, err, tc.msg)
		}
	}
}

func TestNormaliseNameserver(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"127.0.0.1", "127.0.0.1"},
		{"8.8.8.8,8.8.8.9", "8.8.8.8 8.8.8.9"}, // pve-container src/test
		{"127.0.0.1,192.168.0.1", "127.0.0.1 192.168.0.1"}, // pve-container src/test
		{" 1.1.1.1;  2606:4700:4700::1111\tns1.example.com ", "1.1.1.1 2606:4700:4700::1111 ns1.example.com"},
		{"2001:DB8:0::53", "2001:db8::53"},
	} {
		got, err := NormaliseNameserver(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormaliseNameserver(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"8.8.8.8 bad_name", "fe80::1%eth0", "-ns.example.com"} {
		if _, err := NormaliseNameserver(bad); err == nil || !strings.Contains(err.Error(), "neither an IP address nor a DNS name") {
			t.Errorf("NormaliseNameserver(%q) error = %v", bad, err)
		}
	}
}

// FuzzSSHKeys: decoding an encoding gives the keys back; normalising is
// idempotent.
func FuzzSSHKeys(f *testing.F) {
	f.Add(EncodeSSHKeys([]string{testRSAKey, testEd25519Key}))
	f.Add("a%2fb%zz%4%0D%0A%0A")
	f.Add("%25%32%46")
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := DecodeSSHKeys(s)
		if err != nil {
			return
		}
		enc := EncodeSSHKeys(keys)
		again, err := DecodeSSHKeys(enc)
		if err != nil || !reflect.DeepEqual(again, keys) {
			t.Fatalf("DecodeSSHKeys(EncodeSSHKeys(%q)) = %q, %v", keys, again, err)
		}
		if n, err := NormaliseSSHKeys(enc); err != nil || n != enc {
			t.Fatalf("NormaliseSSHKeys(%q) = %q, %v", enc, n, err)
		}
	})
}

// FuzzNormaliseIPConfig: normalising is idempotent.
func FuzzNormaliseIPConfig(f *testing.F) {
	for _, s := range []string{"ip=dhcp", "ip=10.0.0.5/24,gw=10.0.0.1", "ip6=2001:DB8::1/64,gw6=::1,ip=manual", " ip6 = auto "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once, err := NormaliseIPConfig(s)
		if err != nil {
			return
		}
		twice, err := NormaliseIPConfig(once)
		if err != nil || twice != once {
			t.Fatalf("NormaliseIPConfig(%q) = %q, then %q, %v", s, once, twice, err)
		}
	})
}

// FuzzNormaliseNameserver: normalising is idempotent.
func FuzzNormaliseNameserver(f *testing.F) {
	f.Add("8.8.8.8,8.8.8.9")
	f.Add("::ffff:1.2.3.4; ns.example.com")
	f.Fuzz(func(t *testing.T, s string) {
		once, err := NormaliseNameserver(s)
		if err != nil {
			return
		}
		twice, err := NormaliseNameserver(once)
		if err != nil || twice != once {
			t.Fatalf("NormaliseNameserver(%q) = %q, then %q, %v", s, once, twice, err)
		}
	})
}
