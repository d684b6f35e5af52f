package pvesim_test

import (
	"strings"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestQEMULifecycle drives a VM through its whole life with go-proxmox
// v0.8.1, unchanged, over real HTTP.
func TestQEMULifecycle(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	c := tokenClient(s)
	ctx := ctxT(t)

	n, err := c.Node(ctx, "pve1")
	if err != nil {
		t.Fatal(err)
	}
	// create
	task, err := n.NewVirtualMachine(ctx, 200,
		proxmox.VirtualMachineOption{Name: "name", Value: "web-1"},
		proxmox.VirtualMachineOption{Name: "cores", Value: 2},
		proxmox.VirtualMachineOption{Name: "memory", Value: 2048},
		proxmox.VirtualMachineOption{Name: "scsi0", Value: "ceph:32"}, // shared: clonable to pve2
		proxmox.VirtualMachineOption{Name: "net0", Value: "virtio,bridge=vmbr0"},
	)
	mustOK(t, s, task, err)
	if task.Type != "qmcreate" || task.ID != "200" || task.Node != "pve1" {
		t.Fatalf("task fields from UPID: %+v", task)
	}
	vm, err := n.VirtualMachine(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	if vm.Name != "web-1" || vm.Status != "stopped" || *vm.VirtualMachineConfig.Cores != 2 {
		t.Fatalf("vm after create: name=%q status=%q cores=%d", vm.Name, vm.Status, *vm.VirtualMachineConfig.Cores)
	}
	if vm.CPUs != 2 || vm.MaxMem != 2048<<20 {
		t.Fatalf("status/current cpus=%d maxmem=%d", vm.CPUs, vm.MaxMem)
	}
	if !strings.HasPrefix(vm.VirtualMachineConfig.SCSIs["scsi0"], "ceph:vm-200-disk-0,size=32G") {
		t.Fatalf("disk not allocated: %q", vm.VirtualMachineConfig.SCSIs["scsi0"])
	}
	if !strings.HasPrefix(vm.VirtualMachineConfig.Nets["net0"], "virtio=BC:24:11:") {
		t.Fatalf("no MAC generated: %q", vm.VirtualMachineConfig.Nets["net0"])
	}
	digest := vm.VirtualMachineConfig.Digest

	// config without digest (async POST returns a task)
	task, err = vm.Config(ctx, proxmox.VirtualMachineOption{Name: "description", Value: "frontend\n\n"})
	mustOK(t, s, task, err)
	// config with the current digest
	vm, err = n.VirtualMachine(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	if vm.VirtualMachineConfig.Digest == digest {
		t.Fatal("digest did not change on write")
	}
	if vm.VirtualMachineConfig.Description != "frontend" {
		t.Fatalf("QEMU description should read back right-trimmed, got %q", vm.VirtualMachineConfig.Description)
	}
	task, err = vm.Config(ctx,
		proxmox.VirtualMachineOption{Name: "cores", Value: 4},
		proxmox.VirtualMachineOption{Name: "digest", Value: vm.VirtualMachineConfig.Digest})
	mustOK(t, s, task, err)
	// a stale digest is refused with Proxmox's text in the reason phrase
	_, err = vm.Config(ctx,
		proxmox.VirtualMachineOption{Name: "cores", Value: 1},
		proxmox.VirtualMachineOption{Name: "digest", Value: digest})
	errContains(t, err, "500 checksum mismatch (file change by other user?)")
	if g, _ := s.Guest(200); g.Config["cores"] != "4" {
		t.Fatalf("stale-digest write must not apply, cores=%s", g.Config["cores"])
	}

	// start, status, start again (a failed task, as on Proxmox)
	task, err = vm.Start(ctx)
	mustOK(t, s, task, err)
	if err := vm.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if vm.Status != "running" || vm.QMPStatus != "running" || vm.PID == 0 {
		t.Fatalf("after start: status=%q qmp=%q pid=%d", vm.Status, vm.QMPStatus, vm.PID)
	}
	task, err = vm.Start(ctx)
	if err != nil {
		t.Fatalf("start of a running VM must return a task, got %v", err)
	}
	task = waitTask(t, s, task)
	if !task.IsFailed || task.ExitStatus != "VM 200 already running" {
		t.Fatalf("second start: failed=%v exit=%q", task.IsFailed, task.ExitStatus)
	}

	// shutdown, stop of a stopped VM is a successful no-op
	task, err = vm.Shutdown(ctx)
	mustOK(t, s, task, err)
	if g, _ := s.Guest(200); g.Status != "stopped" {
		t.Fatalf("after shutdown: %s", g.Status)
	}
	task, err = vm.Stop(ctx)
	mustOK(t, s, task, err)
	task, err = vm.Start(ctx)
	mustOK(t, s, task, err)
	task, err = vm.Stop(ctx)
	mustOK(t, s, task, err)

	// clone (full, to another node) and template
	newid, task, err := vm.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 201, Name: "web-2", Target: "pve2"})
	mustOK(t, s, task, err)
	if newid != 201 || task.Type != "qmclone" || task.ID != "200" {
		t.Fatalf("clone: newid=%d type=%s id=%s", newid, task.Type, task.ID)
	}
	n2, _ := c.Node(ctx, "pve2")
	clone, err := n2.VirtualMachine(ctx, 201)
	if err != nil {
		t.Fatal(err)
	}
	if clone.Name != "web-2" || clone.VirtualMachineConfig.Nets["net0"] == vm.VirtualMachineConfig.Nets["net0"] {
		t.Fatalf("clone name %q, net0 %q vs %q (MAC must be regenerated)", clone.Name, clone.VirtualMachineConfig.Nets["net0"], vm.VirtualMachineConfig.Nets["net0"])
	}
	task, err = vm.ConvertToTemplate(ctx)
	mustOK(t, s, task, err)
	if g, _ := s.Guest(200); !g.Template || !strings.Contains(g.Config["scsi0"], "base-200-disk-0") {
		t.Fatalf("template: %+v", g)
	}
	_, err = vm.Start(ctx)
	errContains(t, err, "500 you can't start a vm if it's a template")
	// a linked clone of the template
	_, task, err = vm.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 202})
	mustOK(t, s, task, err)
	if g, _ := s.Guest(202); g.Config["name"] != "Copy-of-VM-web-1" || !strings.Contains(g.Config["scsi0"], "base-200-disk-0/vm-202-disk-0") {
		t.Fatalf("linked clone: %+v", g.Config)
	}

	// delete: running refused, stopped deleted
	task, err = clone.Start(ctx)
	mustOK(t, s, task, err)
	_, err = clone.Delete(ctx, &proxmox.VirtualMachineDeleteOptions{Purge: true})
	errContains(t, err, "500 VM 201 is running - destroy failed")
	task, err = clone.Stop(ctx)
	mustOK(t, s, task, err)
	task, err = clone.Delete(ctx, &proxmox.VirtualMachineDeleteOptions{Purge: true, DestroyUnreferencedDisks: true})
	mustOK(t, s, task, err)
	if _, ok := s.Guest(201); ok {
		t.Fatal("guest 201 still exists after delete")
	}
	_, err = n2.VirtualMachine(ctx, 201)
	errContains(t, err, "500 Configuration file 'nodes/pve2/qemu-server/201.conf' does not exist")

	// every mutation is in /cluster/tasks, as on Proxmox
	cl, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := cl.Tasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, tk := range tasks {
		types[tk.Type]++
	}
	for typ, want := range map[string]int{"qmcreate": 1, "qmconfig": 2, "qmstart": 4, "qmshutdown": 1, "qmstop": 3, "qmclone": 2, "qmtemplate": 1, "qmdestroy": 1} {
		if types[typ] != want {
			t.Errorf("/cluster/tasks has %d %s tasks, want %d (all: %v)", types[typ], typ, want, types)
		}
	}
}

// TestLXCLifecycle drives a container through its life with go-proxmox.
func TestLXCLifecycle(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, err := c.Node(ctx, "pve1")
	if err != nil {
		t.Fatal(err)
	}
	apps, err := n.Appliances(ctx)
	if err != nil || len(apps) == 0 {
		t.Fatalf("appliances: %v %d", err, len(apps))
	}
	// missing ostemplate is PVE's 400 with the field named
	_, err = n.NewContainer(ctx, 300, proxmox.ContainerOption{Name: "hostname", Value: "db-1"})
	errContains(t, err, `"ostemplate":"property is missing and it is not optional`)

	task, err := n.NewContainer(ctx, 300,
		proxmox.ContainerOption{Name: "ostemplate", Value: "local:vztmpl/" + apps[0].Template},
		proxmox.ContainerOption{Name: "hostname", Value: "db-1"},
		proxmox.ContainerOption{Name: "cores", Value: 2},
		proxmox.ContainerOption{Name: "memory", Value: 1024},
		proxmox.ContainerOption{Name: "rootfs", Value: "local-lvm:8"},
		proxmox.ContainerOption{Name: "net0", Value: "name=eth0,bridge=vmbr0,ip=dhcp"},
	)
	mustOK(t, s, task, err)
	if task.Type != "vzcreate" {
		t.Fatalf("type %s", task.Type)
	}
	ct, err := n.Container(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	if ct.Name != "db-1" || ct.Status != "stopped" || ct.ContainerConfig.Cores != 2 || *ct.ContainerConfig.Memory != 1024 {
		t.Fatalf("after create: %q %q cores=%d mem=%d", ct.Name, ct.Status, ct.ContainerConfig.Cores, *ct.ContainerConfig.Memory)
	}
	// LXC config is a synchronous PUT: go-proxmox gets (nil task, nil error)
	task, err = ct.Config(ctx, proxmox.ContainerOption{Name: "description", Value: "primary db"},
		proxmox.ContainerOption{Name: "digest", Value: ct.ContainerConfig.Digest})
	if err != nil || task != nil {
		t.Fatalf("LXC config: task=%v err=%v", task, err)
	}
	_, err = ct.Config(ctx, proxmox.ContainerOption{Name: "cores", Value: 1},
		proxmox.ContainerOption{Name: "digest", Value: ct.ContainerConfig.Digest})
	errContains(t, err, "500 detected modified configuration - file changed by other user? Try again.")
	ct, _ = n.Container(ctx, 300)
	if ct.ContainerConfig.Description != "primary db\n" {
		t.Fatalf("LXC description reads back with its newline, got %q", ct.ContainerConfig.Description)
	}

	// stop/shutdown of a stopped CT: immediate 500, unlike QEMU
	_, err = ct.Stop(ctx)
	errContains(t, err, "500 CT 300 not running")
	task, err = ct.Start(ctx)
	mustOK(t, s, task, err)
	_, err = ct.Start(ctx)
	errContains(t, err, "500 CT 300 already running")
	task, err = ct.Reboot(ctx)
	mustOK(t, s, task, err)
	task, err = ct.Shutdown(ctx, false, 30)
	mustOK(t, s, task, err)
	_, err = ct.Reboot(ctx)
	errContains(t, err, "500 VM 300 not running") // (sic) as Proxmox says
	task, err = ct.Start(ctx)
	mustOK(t, s, task, err)
	task, err = ct.Stop(ctx)
	mustOK(t, s, task, err)
	if task.Type != "vzstop" {
		t.Fatalf("type %s", task.Type)
	}

	// clone keeps the hostname unless given
	newid, task, err := ct.Clone(ctx, &proxmox.ContainerCloneOptions{NewID: 301, Hostname: "db-2"})
	mustOK(t, s, task, err)
	if g, _ := s.Guest(newid); g.Config["hostname"] != "db-2" || g.Kind != pvesim.LXC {
		t.Fatalf("LXC clone: %+v", g)
	}
	// template (go-proxmox discards the UPID) then a linked clone of it
	if err := ct.Template(ctx); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(300); !g.Template {
		t.Fatal("CT 300 not a template")
	}
	_, task, err = ct.Clone(ctx, &proxmox.ContainerCloneOptions{NewID: 302, Full: false})
	mustOK(t, s, task, err)

	// delete: running without force refused; with force it goes
	c301, _ := n.Container(ctx, 301)
	task, err = c301.Start(ctx)
	mustOK(t, s, task, err)
	_, err = c301.Delete(ctx, &proxmox.ContainerDeleteOptions{Purge: true})
	errContains(t, err, "500 unable to destroy CT 301 - container is running")
	task, err = c301.Delete(ctx, &proxmox.ContainerDeleteOptions{Force: true, Purge: true})
	mustOK(t, s, task, err)
	if _, ok := s.Guest(301); ok {
		t.Fatal("CT 301 still exists")
	}
}
