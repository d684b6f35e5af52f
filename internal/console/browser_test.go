package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// One Chromium serves every browser test of the package (each in its own
// tabs); TestMain stops it.
var browser struct {
	once sync.Once
	ctx  context.Context
	err  error
	stop func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.stop != nil {
		browser.stop()
	}
	os.Exit(code)
}

// chromium is the shared headless browser. Without one the test is
// skipped on a developer's machine and fails under CI (CI=1), which
// installs what the tests need.
func chromium(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no chromium on PATH for the console's browser tests: install chromium (apt-get install -y chromium)")
		}
		t.Skip("SKIPPED: no chromium on PATH; install chromium to run the console's browser tests")
	}
	browser.once.Do(func() {
		dir, err := os.MkdirTemp("", "converge-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		alloc, stopAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(path),
			chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
			chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true), chromedp.Flag("hide-scrollbars", true), chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 900))
		ctx, stopBrowser := chromedp.NewContext(alloc)
		browser.ctx, browser.err = ctx, chromedp.Do(ctx) // starts it
		browser.stop = func() { stopBrowser(); stopAlloc(); _ = os.RemoveAll(dir) }
	})
	if browser.err != nil {
		t.Fatalf("starting chromium: %v", browser.err)
	}
	return browser.ctx
}

// tab is one browser tab (its own sessionStorage: its own sign-in).
type tab struct {
	t     *testing.T
	ctx   context.Context
	shots bool // shoot writes screenshots
}

func openTab(t *testing.T, width, height int64) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(chromium(t))
	t.Cleanup(cancel)
	// The tab is created by the first action on its own context: run under
	// a derived one, it would close when that one ends.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	p := &tab{t: t, ctx: ctx}
	p.do("set the viewport", chromedp.EmulateViewport(width, height))
	return p
}

// do runs actions; a failure says what was being done and what the page
// showed.
func (p *tab) do(what string, acts ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, acts...); err != nil {
		p.t.Fatalf("%s: %v\npage:\n%s", what, err, p.shown())
	}
}

// shown is the page's text, for failure messages.
func (p *tab) shown() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + "\n" + document.body.innerText`))
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

// wait waits until the expression is true in the page (polled at each
// animation frame; one that throws, on an element not there yet, is
// false), up to 30 s.
func (p *tab) wait(what, js string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 35*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { try { return !!(`+js+`) } catch { return false } })()`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		p.t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, p.shown())
	}
}

func (p *tab) str(js string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", js, err)
	}
	return s
}

func (p *tab) num(js string) int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", js, err)
	}
	return n
}

// keys types keys into whatever has the focus, as a keyboard would.
func (p *tab) keys(k string) { p.t.Helper(); p.do("typing", chromedp.KeyEvent(k)) }

// tabTo presses Tab until the focused element satisfies js (given as
// an expression over `el`), at most 80 times.
func (p *tab) tabTo(what, js string) {
	p.t.Helper()
	for range 80 {
		if p.num(`(el => (`+js+`) ? 1 : 0)(document.activeElement)`) == 1 {
			return
		}
		p.keys(kb.Tab)
	}
	p.t.Fatalf("Tab never reached %s; focus on %s", what, p.str(`document.activeElement.outerHTML.slice(0, 200)`))
}

// signIn opens the console and signs in with token, as an operator
// pasting it would.
func (p *tab) signIn(base, token string) {
	p.t.Helper()
	p.do("open the console", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	p.do("paste the token", chromedp.SendKeys(chromedp.CSS(`#token`), token+kb.Enter))
	p.wait("signed in", `!document.getElementById('signout').hidden`)
}

// scheme emulates the system's colour scheme, "light" or "dark".
func (p *tab) scheme(s string) {
	p.t.Helper()
	p.do("emulate "+s, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s}}})
		return err
	}))
}

// shootEnv, when set, makes the browser tests write docs/console/*.png.
const shootEnv = "CONVERGE_CONSOLE_SCREENSHOTS"

// shoot writes the viewport (the whole page when full) as
// docs/console/NAME-light.png and NAME-dark.png, when
// CONVERGE_CONSOLE_SCREENSHOTS=1.
func (p *tab) shoot(name string, full bool) {
	p.t.Helper()
	if !p.shots || os.Getenv(shootEnv) != "1" {
		return
	}
	p.do("scroll to the top", script(`window.scrollTo(0, 0)`))
	for _, s := range []string{"light", "dark"} {
		p.scheme(s)
		ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
		shot := chromedp.CaptureScreenshot()
		if full {
			shot = chromedp.FullScreenshot(100) // 100: PNG
		}
		png, err := chromedp.Run(ctx, shot)
		cancel()
		if err != nil {
			p.t.Fatalf("screenshot %s: %v", name, err)
		}
		out := filepath.Join("..", "..", "docs", "console", fmt.Sprintf("%s-%s.png", name, s))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
	p.scheme("")
}

// jsq quotes s for a JavaScript string.
func jsq(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// script runs JavaScript in the page for its effect.
func script(js string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](js)(ctx, t)
		return err
	})
}

// post sends a JSON body with a bearer token, as a service would.
func post(t *testing.T, url, token, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("POST %s: %d %s", url, res.StatusCode, b)
	}
}
