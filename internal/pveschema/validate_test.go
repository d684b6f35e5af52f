package pveschema

import (
	"maps"
	"testing"
)

const (
	qemuConfig = "/nodes/pve/qemu/100/config"
	undeclared = "property is not defined in schema and the schema does not allow additional properties"
	missing    = "property is missing and it is not optional"
)

// TestValidate: each case cites the operation of the API schema it checks.
func TestValidate(t *testing.T) {
	cases := []struct {
		name   string // "API schema: <METHOD> <path>" and what
		method string
		path   string
		params map[string]string
		want   map[string]string
	}{
		// Refused.
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: an undeclared parameter",
			"PUT", qemuConfig, map[string]string{"cores": "2", "colour": "blue"},
			map[string]string{"colour": undeclared}},
		{"API schema: GET /cluster/resources: a type outside the enum",
			"GET", "/cluster/resources", map[string]string{"type": "guest"},
			map[string]string{"type": "value 'guest' does not have a value in the enumeration 'vm, storage, node, sdn'"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: sockets below the minimum",
			"PUT", qemuConfig, map[string]string{"sockets": "0"},
			map[string]string{"sockets": "value must have a minimum value of 1"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: cpulimit above the maximum",
			"PUT", qemuConfig, map[string]string{"cpulimit": "129"},
			map[string]string{"cpulimit": "value must have a maximum value of 128"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: cores not an integer",
			"PUT", qemuConfig, map[string]string{"cores": "two"},
			map[string]string{"cores": "type check ('integer') failed - got 'two'"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: a boolean spelt true in a form body",
			"PUT", qemuConfig, map[string]string{"onboot": "true"},
			map[string]string{"onboot": "type check ('boolean') failed - got 'true'"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: a NIC property string with an unknown key",
			"PUT", qemuConfig, map[string]string{"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,speed=10"},
			map[string]string{"net0": "invalid format - invalid key in comma-separated list property: speed"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: a NIC without its model (default_key)",
			"PUT", qemuConfig, map[string]string{"net1": "bridge=vmbr0"},
			map[string]string{"net1": "invalid format - format error\nnet1.model: " + missing}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: a NIC model outside the enum",
			"PUT", qemuConfig, map[string]string{"net0": "model=rtl9999,bridge=vmbr0"},
			map[string]string{"net0": "invalid format - format error\nnet0.model: value 'rtl9999' does not have a value in the enumeration 'e1000, e1000-82540em, e1000-82544gc, e1000-82545em, e1000e, i82551, i82557b, i82559er, ne2k_isa, ne2k_pci, pcnet, rtl8139, virtio, vmxnet3'"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: a multicast MAC",
			"PUT", qemuConfig, map[string]string{"net0": "virtio=01:24:11:00:00:01"},
			map[string]string{"net0": "invalid format - format error\nnet0.macaddr: invalid format - value does not look like a valid unicast MAC address"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: scsi31 beyond scsi[n]'s 0 to 30",
			"PUT", qemuConfig, map[string]string{"scsi31": "local-lvm:vm-100-disk-1"},
			map[string]string{"scsi31": undeclared}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: an ipconfig with a key it lacks",
			"PUT", qemuConfig, map[string]string{"ipconfig0": "ip=10.0.0.5/24,dns=10.0.0.1"},
			map[string]string{"ipconfig0": "invalid format - invalid key in comma-separated list property: dns"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: an ipconfig address without a prefix",
			"PUT", qemuConfig, map[string]string{"ipconfig0": "ip=10.0.0.5"},
			map[string]string{"ipconfig0": "invalid format - format error\nipconfig0.ip: invalid format - value does not look like a valid ipv4 network configuration"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: sshkeys not URL-encoded",
			"PUT", qemuConfig, map[string]string{"sshkeys": "ssh-ed25519 AAAA"},
			map[string]string{"sshkeys": "invalid format - invalid urlencoded string: ssh-ed25519 AAAA"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: a cicustom volume without its storage",
			"PUT", qemuConfig, map[string]string{"cicustom": "user=snippets/user.yaml"},
			map[string]string{"cicustom": "invalid format - format error\ncicustom.user: invalid format - unable to parse volume ID 'snippets/user.yaml'"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: a bad tag",
			"PUT", qemuConfig, map[string]string{"tags": "ok;no/slash"},
			map[string]string{"tags": "invalid format - invalid tag 'no/slash'"}},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: the path's vmid checked too",
			"PUT", "/nodes/pve/qemu/42/config", map[string]string{"cores": "2"},
			map[string]string{"vmid": "value must have a minimum value of 100"}},
		{"API schema: POST /nodes/{node}/qemu/{vmid}/status/start: a node name that is no name",
			"POST", "/nodes/pve_1/qemu/100/status/start", nil,
			map[string]string{"node": "invalid format - value does not look like a valid node name"}},
		{"API schema: POST /nodes/{node}/qemu: vmid is mandatory",
			"POST", "/nodes/pve/qemu", map[string]string{"name": "web"},
			map[string]string{"vmid": missing}},
		{"API schema: POST /cluster/ha/resources: a state outside the enum",
			"POST", "/cluster/ha/resources", map[string]string{"sid": "vm:100", "state": "running"},
			map[string]string{"state": "value 'running' does not have a value in the enumeration 'started, stopped, enabled, disabled, ignored'"}},
		{"API schema: GET /nope: an unknown path is Proxmox's 501",
			"GET", "/nope", nil,
			map[string]string{"": "Method 'GET /nope' not implemented"}},

		// Accepted.
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: sockets 8, rarely used",
			"PUT", qemuConfig, map[string]string{"sockets": "8", "cores": "4", "cpulimit": "1.5"}, nil},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: indexed keys net0, scsi3, ipconfig1",
			"PUT", qemuConfig, map[string]string{
				"net0":      "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1",
				"scsi3":     "local-lvm:vm-100-disk-3,size=32G,discard=on",
				"ipconfig1": "ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto",
			}, nil},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: a NIC model by key, a boolean spelt on",
			"PUT", qemuConfig, map[string]string{"net2": "model=e1000,macaddr=BC:24:11:00:00:02,link_down=on"}, nil},
		{"API schema: PUT /nodes/{node}/qemu/{vmid}/config: memory's bare default_key, delete list, onboot 0",
			"PUT", qemuConfig, map[string]string{"memory": "2048", "delete": "description,tags", "onboot": "0", "tags": "web;prod"}, nil},
		{"API schema: PUT /cluster/ha/resources/{sid}: max_restart and failback",
			"PUT", "/cluster/ha/resources/vm:100", map[string]string{"max_restart": "3", "failback": "0"}, nil},
		{"API schema: GET /nodes/{node}/tasks/{upid}/status: a raw UPID in the path",
			"GET", "/nodes/pve/tasks/UPID:pve:000137B5:00112EB4:6991F9E1:qmstart:100:root@pam:/status", nil, nil},
		{"API schema: GET /cluster/resources: type vm",
			"GET", "/cluster/resources", map[string]string{"type": "vm"}, nil},
		{"API schema: POST /nodes/{node}/lxc: a container with mp0 and net0",
			"POST", "/nodes/pve/lxc", map[string]string{
				"vmid": "200", "ostemplate": "local:vztmpl/debian-12.tar.zst",
				"net0": "name=eth0,bridge=vmbr0,ip=dhcp", "mp0": "local-lvm:8,mp=/srv",
			}, nil},
		{"API schema: POST /access/ticket: username and password",
			"POST", "/access/ticket", map[string]string{"username": "root@pam", "password": "secret"}, nil},
		{"API schema: GET /version: no parameters",
			"GET", "/version", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Validate(c.method, c.path, c.params)
			if c.want == nil {
				c.want = map[string]string{}
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("Validate(%s %s, %v)\n got %q\nwant %q", c.method, c.path, c.params, got, c.want)
			}
		})
	}
}

// TestLookupPrefersLiterals: /nodes/{node}/qemu/{vmid}/status/current is
// not mistaken for a template with a parameter in that place.
func TestLookupPrefersLiterals(t *testing.T) {
	op, vals, ok := Lookup("GET", "/nodes/pve/qemu/100/status/current")
	if !ok || op.Path != "/nodes/{node}/qemu/{vmid}/status/current" || vals["node"] != "pve" || vals["vmid"] != "100" {
		t.Fatalf("Lookup = %v %v %v", op, vals, ok)
	}
}
