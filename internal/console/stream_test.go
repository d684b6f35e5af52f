package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

const liveText = `document.getElementById('live').textContent`

// hide and show make the tab's document hidden or visible, as switching
// tabs or minimising the window does.
func visibility(state string) chromedp.Action[chromedp.Void] {
	return script(`Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => '` + state + `'});
		document.dispatchEvent(new Event('visibilitychange'))`)
}

// A hidden tab gives its stream's connection back (over plain HTTP/1.1
// six tabs' streams would hold every connection the browser allows to
// the server) and, visible again, reopens it and resyncs.
func TestConsoleHiddenTabClosesStream(t *testing.T) {
	a := rawGuest(100, "converged", nil, map[string]any{"name": "a"}, nil)
	b := rawGuest(101, "converged", nil, map[string]any{"name": "b"}, nil)
	f := newRaw(t, a, b)
	p := openTab(t, 1280, 900)
	p.signIn(f.srv.URL, "any-token-0123456789")
	p.wait("both guests, live", rows+`.length === 2 && `+liveText+` === 'live'`)
	waitFor(t, "one stream open", func() bool { return f.open.Load() == 1 })

	p.do("hide the tab", visibility("hidden"))
	waitFor(t, "the stream closed", func() bool { return f.open.Load() == 0 })
	p.wait("the header says why", liveText+`.includes('paused while the tab is hidden')`)
	f.setGuests(a) // 101 goes while the tab is hidden

	p.do("show the tab", visibility("visible"))
	p.wait("resynced: live, 101 gone", rows+`.length === 1 && `+liveText+` === 'live'`)
	waitFor(t, "one stream open again", func() bool { return f.open.Load() == 1 })
	if n := f.streams.Load(); n != 2 {
		t.Errorf("%d stream requests, want 2 (the first, and one when visible again)", n)
	}
}

// A write in flight says so: the dialog's button reads "Sending…" until
// the server answers.
func TestConsoleWriteShowsSending(t *testing.T) {
	g := rawGuest(100, "held", nil, map[string]any{"name": "a"}, nil)
	g["awaits_approval"] = "guard"
	f := newRaw(t, g)
	answer := make(chan struct{})
	f.write = func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-answer:
		case <-r.Context().Done():
			return
		}
		writeJSON(w, 202, map[string]any{"seq": 7})
	}
	p := openTab(t, 1280, 900)
	p.signIn(f.srv.URL, "any-token-0123456789")
	p.do("approvals", chromedp.Navigate(f.srv.URL+"/#/approvals"))
	btn := `#held-rows li[data-vmid="100"] button[data-command="approve"]`
	p.wait("the held guest", `document.querySelector('`+btn+`')`)
	p.do("approve", chromedp.Click(chromedp.CSS(btn)), chromedp.WaitVisible(chromedp.CSS(`#confirm-reason`)))
	p.do("confirm", chromedp.Click(chromedp.CSS(`#confirm-ok`)))
	p.wait("sending", `(b => b.textContent === 'Sending…' && b.disabled)(document.getElementById('confirm-ok'))`)
	close(answer)
	p.wait("the answer", `document.getElementById('notice').textContent.includes('accepted: journal sequence 7') && !document.getElementById('confirm').open`)
}

// A refused stream (503: too many streams) is explained with the
// server's words while the console retries.
func TestConsoleStreamRefusedSaysWhy(t *testing.T) {
	f := newRaw(t, rawGuest(100, "converged", nil, map[string]any{"name": "a"}, nil))
	f.refuse = func(n int32) (int, string) {
		if n <= 2 {
			return 503, "too many open streams on this server or for this token"
		}
		return 0, ""
	}
	p := openTab(t, 1280, 900)
	p.signIn(f.srv.URL, "any-token-0123456789")
	p.wait("the refusal shown", liveText+`.includes('stream refused: 503: too many open streams')`)
	p.wait("retried until accepted", rows+`.length === 1 && `+liveText+` === 'live'`)
	if n := f.streams.Load(); n != 3 {
		t.Errorf("%d stream requests, want 3", n)
	}
}

// A stream the server ends cleanly (it does after 10 minutes) is
// reopened at once, without announcing the console offline.
func TestConsoleStreamEndedReconnectsQuietly(t *testing.T) {
	a := rawGuest(100, "converged", nil, map[string]any{"name": "a"}, nil)
	f := newRaw(t, a, rawGuest(101, "converged", nil, map[string]any{"name": "b"}, nil))
	p := openTab(t, 1280, 900)
	p.signIn(f.srv.URL, "any-token-0123456789")
	p.wait("both guests, live", rows+`.length === 2 && `+liveText+` === 'live'`)
	p.do("record the header", script(`window.__live = []; new MutationObserver(() => window.__live.push(`+liveText+`)).observe(document.getElementById('live'), {childList: true, characterData: true, subtree: true})`))
	f.setGuests(a)
	f.end <- struct{}{}
	p.wait("the next stream's guests", rows+`.length === 1 && `+liveText+` === 'live'`)
	if s := p.str(`JSON.stringify(window.__live)`); strings.Contains(s, "offline") {
		t.Errorf("the header said %s across a clean end", s)
	}
	if n := f.streams.Load(); n != 2 {
		t.Errorf("%d stream requests, want 2", n)
	}
}
