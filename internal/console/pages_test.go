package console_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/audit"
)

// A long timeline comes a page at a time (Older entries asks for the
// page before the oldest shown); signing out forgets the token, and a
// reload then asks for one again.
func TestConsoleTimelineAndSignOut(t *testing.T) {
	const write = "ops-0123456789abcdef"
	f := newFake(t, 3, map[string][2]string{write: {"ops", "write"}})
	f.mu.Lock()
	for i := range 40 {
		f.journal(101, audit.Entry{Kind: events.KindObserved, Who: "observer", Summary: fmt.Sprintf("pass %d", i)})
	}
	f.mu.Unlock()
	p := openTab(t, 1280, 900)
	p.signIn(f.srv.URL, write)
	p.do("the guest", chromedp.Navigate(f.srv.URL+"/#/guest/101"))
	const entries = `document.querySelectorAll('ol.timeline > li').length`
	p.wait("the newest 25 entries", entries+` === 25`)
	if first := p.str(`document.querySelector('ol.timeline > li .entry-kind').parentElement.textContent`); first != "observed: pass 39" {
		t.Errorf("newest entry %q, want the last pass", first)
	}
	p.do("older", chromedp.Click(chromedp.CSS(`ol.timeline ~ button`)))
	p.wait("all 41", entries+` === 41`)
	p.wait("no older page", `document.querySelector('ol.timeline ~ button').hidden`)
	if n := p.num(`new Set([...document.querySelectorAll('ol.timeline > li')].map(li => li.dataset.seq)).size`); n != 41 {
		t.Errorf("%d distinct entries, want 41", n)
	}

	p.do("sign out", chromedp.Click(chromedp.CSS(`#signout`)))
	p.wait("the sign-in form", `document.getElementById('token')`)
	if n := p.num(`sessionStorage.length`); n != 0 {
		t.Errorf("sessionStorage keeps %d items after signing out", n)
	}
	p.do("reload", chromedp.Reload())
	p.wait("still signed out", `document.getElementById('token') && document.getElementById('signout').hidden`)
}
