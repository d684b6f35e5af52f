package console_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The "differs" marks are the planner's drift, field by field: tags equal
// but for case, order or converge's owner tag, a description but for
// trailing whitespace, are not marked; disks and NICs the planner reports
// are, with its words.
func TestConsoleDriftMarks(t *testing.T) {
	cfg := func(k string, v any) map[string]any {
		c := map[string]any{"name": "web", "description": "", "tags": []string{}, "cores": 2, "memory_mib": 2048, "onboot": false}
		c[k] = v
		return c
	}
	f := newRaw(t,
		rawGuest(100, "converged", map[string]any{"vmid": 100, "tags": []string{"Web", "db"}}, cfg("tags", []string{"db", "web"}), nil),
		rawGuest(101, "converged", map[string]any{"vmid": 101, "tags": []string{"web"}}, cfg("tags", []string{"converge-owned", "web"}), nil),
		rawGuest(102, "converged", map[string]any{"vmid": 102, "description": "hello\n"}, cfg("description", "hello"), nil),
		rawGuest(103, "pending", map[string]any{"vmid": 103, "cores": 4, "disks": map[string]any{"scsi0": map[string]any{"size_gib": 20}}, "net": map[string]any{"net0": map[string]any{"bridge": "vmbr1"}}},
			map[string]any{"name": "web", "cores": 2, "disks": map[string]any{"scsi0": map[string]any{"storage": "local-lvm", "size_bytes": 10737418240}}, "net": map[string]any{"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"}},
			[]string{"disks.scsi0: want 20 GiB, have 10 GiB", `net.net0: want "virtio=BC:24:11:00:00:01,bridge=vmbr1", have "virtio=BC:24:11:00:00:01,bridge=vmbr0"`}),
	)
	p := openTab(t, 1280, 900)
	p.signIn(f.srv.URL, "any-token-0123456789")
	p.wait("the guests", rows+`.length === 4`)
	for _, c := range []struct {
		vmid   int
		field  string
		differ bool
		says   string
	}{
		{100, "tags", false, ""},
		{101, "tags", false, ""},
		{102, "description", false, ""},
		{103, "disks", true, "scsi0: want 20 GiB, have 10 GiB"},
		{103, "net", true, `want "virtio=BC:24:11:00:00:01,bridge=vmbr1"`},
		{103, "cores", false, ""}, // desired 4, observed 2, but the planner reports no drift: the console says none
	} {
		row := fmt.Sprintf(`document.querySelector('table.compare tr[data-field="%s"]')`, c.field)
		p.do("the guest", chromedp.Navigate(fmt.Sprintf("%s/#/guest/%d", f.srv.URL, c.vmid)))
		p.wait("its comparison", fmt.Sprintf(`document.querySelector('h1').textContent.startsWith('Guest %d') && %s`, c.vmid, row))
		marked := p.num(row+`.classList.contains('differs') ? 1 : 0`) == 1
		mark := p.str(row + `.querySelector('.mark').textContent`)
		if marked != c.differ {
			t.Errorf("guest %d %s: marked %v, want %v (mark %q)", c.vmid, c.field, marked, c.differ, mark)
		}
		if c.says != "" && !strings.Contains(mark, c.says) {
			t.Errorf("guest %d %s: mark %q does not say %q", c.vmid, c.field, mark, c.says)
		}
	}
}
