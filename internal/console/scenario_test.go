package console_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// target is a converge (or the fake) the browser scenario drives.
type target struct {
	url         string
	write, read string // tokens of scope write and read
	guests      int    // how many guests the guests page must list
	// desire publishes a desired state as a service would, not through
	// the console.
	desire func(t *testing.T, vmid int, body string)
	// hold makes a guest's stop wait for the mass-change guard and
	// returns it.
	hold func(t *testing.T) int
	// stopped waits until the server has the guest converged and stopped.
	stopped func(t *testing.T, vmid int)
	// shots: this walk writes docs/console's screenshots (when
	// CONVERGE_CONSOLE_SCREENSHOTS=1): the real converge's, not the fake's.
	shots bool
}

// Rows of the guests table, and a JS expression over the row of vmid.
const rows = `document.querySelectorAll('#guest-rows tr')`

func rowOf(vmid int) string {
	return fmt.Sprintf(`document.querySelector('#guest-rows tr[data-vmid="%d"]')`, vmid)
}

// scenario is issue 40's walk through the console: sign-in, the guests
// and a filter, a live change, a guest's page and timeline, an approval
// with a reason, a read token refused, and the keyboard alone on a phone.
func scenario(t *testing.T, tg target) {
	w := openTab(t, 1280, 900)
	w.shots = tg.shots
	var live int
	// Each step builds on the one before: the first failure ends the walk.
	step := func(name string, f func(t *testing.T)) {
		if !t.Failed() {
			t.Run(name, f)
		}
	}

	step("sign-in", func(t *testing.T) {
		w.t = t
		w.do("open the console", chromedp.Navigate(tg.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
		w.shoot("sign-in", false)
		w.do("a wrong token", chromedp.SendKeys(chromedp.CSS(`#token`), "not-a-token-at-all"+kb.Enter))
		w.wait("the refusal", `document.getElementById('signin-error').textContent === 'token refused'`)
		w.signIn(tg.url, tg.write)
		if got := w.str(`document.getElementById('who').textContent`); got == "" {
			t.Error("the header does not say who is signed in")
		}
		if s := w.str(`document.cookie + location.href`); strings.Contains(s, tg.write) {
			t.Errorf("the token is in a cookie or the URL: %q", s)
		}
	})

	step("guests", func(t *testing.T) {
		w.t = t
		w.wait(fmt.Sprintf("%d guests listed", tg.guests), fmt.Sprintf(`%s.length === %d`, rows, tg.guests))
		w.wait("the count", fmt.Sprintf(`document.getElementById('shown').textContent === '%d guests'`, tg.guests))
		if n := w.num(`document.querySelectorAll('.counts li').length`); n < 1 {
			t.Error("no count per state")
		}
		// Every row says its state in words, not only by colour.
		if n := w.num(rows + `.length - [...` + rows + `].filter(r => r.querySelector('.state').textContent.trim()).length`); n != 0 {
			t.Errorf("%d rows without their state as text", n)
		}
		w.shoot("guests", false)
		// A node filter narrows the table to that node's guests.
		node := w.str(`document.querySelector('#f-node').options[1].value`)
		w.do("filter by node", script(`(s => { s.value = `+jsq(node)+`; s.dispatchEvent(new Event('change')) })(document.querySelector('#f-node'))`))
		w.wait("the node's guests only", fmt.Sprintf(`%s.length > 0 && %s.length < %d && [...%s].every(r => r.children[3].textContent === %s)`, rows, rows, tg.guests, rows, jsq(node)))
		// Free text on top: one guest by its VMID.
		first := w.num(`Number(` + rows + `[0].dataset.vmid)`)
		w.do("search", chromedp.SendKeys(chromedp.CSS(`#f-text`), strconv.Itoa(first)))
		w.wait("the one guest", fmt.Sprintf(`%s.length >= 1 && %s`, rows, rowOf(first)))
		w.do("clear the filters", script(`document.querySelector('#f-text').value = ''; document.querySelector('#f-node').value = ''; document.querySelector('#f-text').dispatchEvent(new Event('input'))`))
		w.wait("every guest again", fmt.Sprintf(`%s.length === %d`, rows, tg.guests))
		live = first
	})

	step("live", func(t *testing.T) {
		w.t = t
		w.do("mark the page", script(`window.notReloaded = true`))
		tg.desire(t, live, fmt.Sprintf(`{"vmid":%d,"tags":["console-live"]}`, live))
		w.wait("the new tag in the row", rowOf(live)+`.textContent.includes('console-live')`)
		if w.num(`window.notReloaded ? 1 : 0`) != 1 {
			t.Error("the page was reloaded")
		}
	})

	step("guest", func(t *testing.T) {
		w.t = t
		w.do("open the guest", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#guest-rows tr[data-vmid="%d"] a`, live))))
		w.wait("its page", fmt.Sprintf(`document.querySelector('h1').textContent.startsWith('Guest %d')`, live))
		w.wait("desired and observed", `document.querySelector('table.compare tr[data-field="tags"]')`)
		w.wait("the timeline", `document.querySelectorAll('ol.timeline > li').length > 0`)
		w.wait("who published it", `document.querySelector('ol.timeline').textContent.includes('published by token:')`)
	})

	// A long unbroken value (a URL in the description, a NIC string)
	// wraps: the page does not widen, and the Observed column and the
	// drift stay on the screen, wide or narrow.
	step("long-values", func(t *testing.T) {
		w.t = t
		const url = "https://wiki.example.com/display/OPS/Runbooks+for+the+web+tier+and+its+load+balancers"
		tg.desire(t, live, fmt.Sprintf(`{"vmid":%d,"tags":["console-live"],"description":"Runbook: %s"}`, live, url))
		w.wait("the description", `document.querySelector('table.compare tr[data-field="description"]').textContent.includes('load+balancers')`)
		inView := `document.documentElement.scrollWidth <= document.documentElement.clientWidth &&
			[...document.querySelectorAll('table.compare th, table.compare td')].every(e => e.getBoundingClientRect().right <= document.documentElement.clientWidth + 1)`
		for _, width := range []int64{1280, 375} {
			w.do(fmt.Sprintf("%d px wide", width), chromedp.EmulateViewport(width, 900))
			w.wait(fmt.Sprintf("every column within %d px", width), inView)
		}
		w.do("1280 px again", chromedp.EmulateViewport(1280, 900))
	})

	var held int
	step("approve", func(t *testing.T) {
		w.t = t
		held = tg.hold(t)
		// Its page: the stop held, power marked as differing.
		w.do("the held guest's page", chromedp.Navigate(fmt.Sprintf("%s/#/guest/%d", tg.url, held)))
		w.wait("power marked as differing", `document.querySelector('tr.differs[data-field="power"] .mark').textContent.includes('differs')`)
		for _, width := range []int64{1280, 375} {
			w.do(fmt.Sprintf("%d px wide", width), chromedp.EmulateViewport(width, 900))
			w.wait(fmt.Sprintf("the drift within %d px", width), `(r => r.right <= document.documentElement.clientWidth + 1 && r.width > 0)(document.querySelector('tr.differs[data-field="power"] .mark').getBoundingClientRect())`)
		}
		w.do("1280 px again", chromedp.EmulateViewport(1280, 900))
		w.wait("its timeline", `document.querySelectorAll('ol.timeline > li').length > 0`)
		w.shoot("guest", true)
		w.do("the approvals page", chromedp.Navigate(tg.url+"/#/approvals"))
		btn := fmt.Sprintf(`#held-rows li[data-vmid="%d"] button[data-command="approve"]`, held)
		w.wait("the held guest", `document.querySelector('`+btn+`')`)
		w.shoot("approvals", false)
		w.do("approve", chromedp.Click(chromedp.CSS(btn)), chromedp.WaitVisible(chromedp.CSS(`#confirm-reason`)))
		w.do("give a reason", chromedp.SendKeys(chromedp.CSS(`#confirm-reason`), "planned maintenance (console test)"+kb.Enter))
		w.wait("the answer", `document.getElementById('notice').textContent.includes('accepted: journal sequence')`)
		w.wait("the guest no longer held", `!document.querySelector('`+btn+`')`)
		tg.stopped(t, held)
		w.do("its page", chromedp.Navigate(fmt.Sprintf("%s/#/guest/%d", tg.url, held)))
		w.wait("converged", `document.querySelector('h1 + p .state').textContent === 'converged'`)
		w.wait("stopped", `document.querySelector('tr[data-field="power"] td:nth-of-type(2)').textContent === 'stopped'`)
		w.wait("the reason journalled", `document.querySelector('ol.timeline').textContent.includes('planned maintenance (console test)')`)
	})

	step("read-token", func(t *testing.T) {
		r := openTab(t, 1280, 900)
		vmid := tg.hold(t)
		r.signIn(tg.url, tg.read)
		r.do("the approvals page", chromedp.Navigate(tg.url+"/#/approvals"))
		btn := fmt.Sprintf(`#held-rows li[data-vmid="%d"] button[data-command="approve"]`, vmid)
		r.wait("the held guest", `document.querySelector('`+btn+`')`)
		if r.num(`[...document.querySelectorAll('[data-write]')].filter(b => b.offsetParent !== null).length`) != 0 {
			t.Error("a read token is offered write controls")
		}
		// Forced: the control shown and pressed anyway; the server says no.
		r.do("force it", script(`document.querySelector('`+btn+`').hidden = false`),
			chromedp.Click(chromedp.CSS(btn)), chromedp.WaitVisible(chromedp.CSS(`#confirm-reason`)),
			chromedp.SendKeys(chromedp.CSS(`#confirm-reason`), kb.Enter))
		r.wait("the refusal", `document.getElementById('notice').textContent.includes('403')`)
		if r.str(`document.getElementById('notice').getAttribute('role')`) != "alert" {
			t.Error("the refusal is not announced as an alert")
		}
	})

	step("keyboard-375", func(t *testing.T) {
		k := openTab(t, 375, 812)
		k.shots = tg.shots
		vmid := tg.hold(t)
		k.do("open the console", chromedp.Navigate(tg.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
		k.wait("the token field focused", `document.activeElement.id === 'token'`)
		k.keys(tg.write + kb.Enter)
		k.wait("signed in", fmt.Sprintf(`%s.length === %d`, rows, tg.guests))
		noScroll := `document.documentElement.scrollWidth <= document.documentElement.clientWidth`
		k.wait("no horizontal scroll on the guests page", noScroll)
		k.shoot("guests-375", false)
		k.tabTo("the Approvals link", `el.dataset.nav === 'approvals'`)
		k.keys(kb.Enter)
		btn := fmt.Sprintf(`el.dataset.focusId === 'approve-%d'`, vmid)
		k.wait("the held guest", fmt.Sprintf(`document.querySelector('#held-rows li[data-vmid="%d"]')`, vmid))
		k.wait("no horizontal scroll on the approvals page", noScroll)
		k.tabTo("its Approve button", btn)
		// Escape closes the dialog and gives the focus back.
		k.keys(kb.Enter)
		k.wait("the dialog", `document.getElementById('confirm').open && document.activeElement.id === 'confirm-reason'`)
		k.keys(kb.Escape)
		k.wait("the dialog closed, focus back", fmt.Sprintf(`!document.getElementById('confirm').open && (el => %s)(document.activeElement)`, btn))
		k.keys(kb.Enter)
		k.wait("the dialog again", `document.getElementById('confirm').open && document.activeElement.id === 'confirm-reason'`)
		k.keys("keyboard approval" + kb.Enter)
		k.wait("the answer", `document.getElementById('notice').textContent.includes('accepted: journal sequence')`)
		k.wait("the focus kept on the page", `document.activeElement && document.activeElement !== document.body`)
		tg.stopped(t, vmid)
		k.wait("the guest no longer held", fmt.Sprintf(`!document.querySelector('#held-rows li[data-vmid="%d"]')`, vmid))
	})
}

// The console's script against the fake /v1 (fake_test.go): the whole
// scenario, without a converge.
func TestConsoleAgainstFake(t *testing.T) {
	const write, read = "ops-0123456789abcdef", "viewer-0123456789abcd"
	f := newFake(t, 50, map[string][2]string{write: {"ops", "write"}, read: {"viewer", "read"}})
	next := 101
	scenario(t, target{url: f.srv.URL, write: write, read: read, guests: 50,
		desire: func(t *testing.T, vmid int, body string) {
			t.Helper()
			post(t, f.srv.URL+"/v1/desired/"+strconv.Itoa(vmid), write, body)
		},
		hold: func(t *testing.T) int {
			next += 3 // running QEMU guests: 100, 101, 103, 104, …
			f.hold(next)
			return next
		},
		stopped: func(t *testing.T, vmid int) {},
	})
}
