package main

// The browser harness: console tests drive a real headless Chromium through the DevTools
// protocol (chromedp) against a real server, and every page they open is held to three
// rules that a unit test of the JavaScript cannot check: it loads nothing from another
// origin (the appliance works offline and behind strict firewalls, and a console that
// pulls a font or a script from a CDN leaks who uses it), it writes no error to the
// console, and it throws nothing uncaught. A test that breaks one of them fails at cleanup
// with the list, whatever it was checking.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// writeScreenshots makes browser.screenshot also write docs/console/<name>-<theme>.png,
// the pictures the documentation shows; without it screenshots only go to the test's
// temporary directory, so a plain test run never dirties the work tree.
var writeScreenshots = flag.Bool("screenshots", false, "write console screenshots into docs/console/")

const (
	// defaultChromium is where Debian's chromium package puts its launcher.
	defaultChromium = "/usr/bin/chromium"
	// viewportWidth and viewportHeight are the size of every page and screenshot, so
	// screenshots compare across runs and machines.
	viewportWidth, viewportHeight = 1280, 720
	// runTimeout bounds one browser.run: long enough for a page load on a loaded
	// 2-core CI machine under -race, short enough that a wait for an element that never
	// comes fails with a screenshot instead of hitting the go test timeout.
	runTimeout = 20 * time.Second
	// startTimeout bounds the start of Chromium itself (first start on a cold disk).
	startTimeout = 60 * time.Second
	// pollInterval is how often waitURL reads the location.
	pollInterval = 50 * time.Millisecond
)

// browser is one headless Chromium with one tab, opened by newBrowser and closed at the
// test's cleanup. Its methods fail t on error, so a test reads as a list of steps; in a
// subtest, use b.sub(t). It is not safe for use by several goroutines at once.
type browser struct {
	t *testing.T
	*tab
}

// tab is what a browser and its sub copies share: the browser, and what the event
// listener records (concurrently, hence the lock).
type tab struct {
	ctx    context.Context // the tab's chromedp context: chromedp.Run(b.ctx, …) for anything the helpers lack
	origin string          // scheme://host:port every request must go to
	theme  string          // "light" or "dark", the prefers-color-scheme in effect
	shots  string          // t.TempDir() for screenshots

	mu         sync.Mutex
	violations []string // requests to another origin
	consoleErr []string // console.error/assert calls, uncaught exceptions, error log entries
	allowed    []string // substrings of console errors the test expects
}

// chromiumPath returns the Chromium to run, or skips the test when there is none: the
// browser tests are optional on a developer's machine but must not silently vanish on
// CI, where an unset-up Chromium fails the run instead.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("LOOKOUT_CHROMIUM")
	if p == "" {
		p = defaultChromium
	}
	if _, err := exec.LookPath(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("console browser tests need chromium, and CI is set: %v (apt-get install chromium, or set LOOKOUT_CHROMIUM)", err)
		}
		t.Skipf("console browser tests need chromium (apt-get install chromium) or LOOKOUT_CHROMIUM; %v", err)
	}
	return p
}

// newBrowser starts Chromium with one 1280×720 tab in the light theme and starts
// recording cross-origin requests and console errors; origin is the server under test
// ("http://127.0.0.1:port", a path is ignored). Cleanup closes the browser and fails
// the test on anything recorded and not taken or allowed.
func newBrowser(t *testing.T, origin string) *browser {
	t.Helper()
	exe := chromiumPath(t)
	o, err := url.Parse(origin)
	if err != nil || o.Scheme == "" || o.Host == "" {
		t.Fatalf("newBrowser: origin %q is not scheme://host:port", origin)
	}
	b := &browser{t: t, tab: &tab{origin: o.Scheme + "://" + o.Host, theme: "light", shots: t.TempDir()}}

	// The defaults (background throttling off, no extensions, sRGB colour profile for
	// stable screenshots, /dev/shm off for small containers) plus what this machine
	// needs: no sandbox as root, no GPU, and nothing Chromium would fetch on its own
	// (QUIC probes, component updates, sync), which would be noise at best.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(viewportWidth, viewportHeight),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// WithListener, not Listen: it sees the events from the tab's first message on, and
	// it runs on the goroutine that reads the tab's messages, so an event the page
	// caused before a command's reply is recorded before that command returns.
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithListener(b.onEvent))
	b.ctx = ctx
	t.Cleanup(func() {
		cancelCtx() // waits for the browser to exit, before t.TempDir is removed
		cancelAlloc()
		b.report()
	})

	// The first Do starts the browser, and its context must live as long as the
	// browser, so it gets no timeout; a watchdog cancels it instead.
	watchdog := time.AfterFunc(startTimeout, cancelCtx)
	err = chromedp.Do(ctx)
	if !watchdog.Stop() {
		t.Fatalf("chromium %s did not start within %v", exe, startTimeout)
	}
	if err != nil {
		t.Fatalf("starting chromium %s: %v", exe, err)
	}
	// The window size flag sizes the window; the override sizes the page, whatever
	// the window manager (none, headless) or Chromium version make of the flag.
	b.run(chromedp.EmulateViewport(viewportWidth, viewportHeight))
	b.setTheme("light")
	return b
}

// sub returns b failing t instead of the test that opened the browser, for a subtest:
// a FailNow on the parent from a subtest's goroutine would end the wrong goroutine. The
// tab and its records are shared; the opener's cleanup still reports them.
func (b *browser) sub(t *testing.T) *browser {
	return &browser{t: t, tab: b.tab}
}

// onEvent records what the harness holds pages to. It runs inside chromedp's read
// loop, so it only appends under the lock.
func (b *tab) onEvent(ev any) {
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		// Also fires for each hop of a redirect, so a same-origin URL that
		// redirects elsewhere is caught at the hop.
		b.checkOrigin(ev.Request.URL)
	case *network.EventWebSocketCreated:
		b.checkOrigin(ev.URL)
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			b.addConsoleError(fmt.Sprintf("console.%s: %s%s", ev.Type, argsText(ev.Args), stackPlace(ev.StackTrace)))
		}
	case *runtime.EventExceptionThrown:
		b.addConsoleError("uncaught: " + exceptionText(ev.ExceptionDetails))
	case *log.EventEntryAdded:
		// Entries from the "network" source are Chromium's "Failed to load resource:
		// the server responded with a status of 401" for every HTTP error status (and
		// net:: errors for refused connections). Error statuses are part of the API's
		// normal use, a 401 on an expired session or a 409 the console shows the
		// user, and the test checks the outcome on the page, so they do not fail the
		// test; a request to the wrong place is caught by the origin check, not here.
		// Every other error entry (CSP, deprecations turned errors, intervention
		// reports) does.
		e := ev.Entry
		if e.Level == log.EntryLevelError && e.Source != log.EntrySourceNetwork {
			place := ""
			if e.URL != "" {
				place = fmt.Sprintf(" (%s:%d)", e.URL, e.LineNumber+1)
			}
			b.addConsoleError(fmt.Sprintf("log %s: %s%s", e.Source, e.Text, place))
		}
	}
}

// checkOrigin records u unless it is same-origin. data: and blob: URLs count as
// violations too: the console has no reason for them, and allowing them would open a
// path around the origin rule (a data: URL script, a blob: worker).
func (b *tab) checkOrigin(u string) {
	if u == "about:blank" || sameOrigin(b.origin, u) {
		return
	}
	if len(u) > 200 {
		u = u[:200] + "…"
	}
	b.mu.Lock()
	b.violations = append(b.violations, u)
	b.mu.Unlock()
}

// sameOrigin reports whether raw has origin's scheme, host and port, with a WebSocket
// (ws, wss) counting as its HTTP scheme (http, https), as browsers treat it.
func sameOrigin(origin, raw string) bool {
	o, err := url.Parse(origin)
	if err != nil {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	scheme := u.Scheme
	switch scheme {
	case "ws":
		scheme = "http"
	case "wss":
		scheme = "https"
	}
	port := func(u *url.URL, scheme string) string {
		if p := u.Port(); p != "" {
			return p
		}
		return map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme == o.Scheme && strings.EqualFold(u.Hostname(), o.Hostname()) && port(u, scheme) == port(o, o.Scheme)
}

func (b *tab) addConsoleError(s string) {
	b.mu.Lock()
	b.consoleErr = append(b.consoleErr, s)
	b.mu.Unlock()
}

// argsText renders console arguments as DevTools shows them, near enough for a failure
// message: strings bare, other values by their description.
func argsText(args []*runtime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		var s string
		switch {
		case a.Type == runtime.RemoteObjectTypeString && json.Unmarshal(a.Value, &s) == nil:
		case a.Description != "":
			s = a.Description
		case len(a.Value) > 0:
			s = string(a.Value)
		default:
			s = string(a.Type)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// stackPlace returns " (url:line)" for the top frame, so a failure names the module.
func stackPlace(st *runtime.StackTrace) string {
	if st == nil || len(st.CallFrames) == 0 {
		return ""
	}
	f := st.CallFrames[0]
	return fmt.Sprintf(" (%s:%d)", f.URL, f.LineNumber+1)
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "exception without details"
	}
	s := d.Text // "Uncaught" or "Uncaught (in promise)"
	if d.Exception != nil && d.Exception.Description != "" {
		s += " " + d.Exception.Description // the error and its stack
	} else if d.Exception != nil && len(d.Exception.Value) > 0 {
		s += " " + string(d.Exception.Value) // a thrown non-Error
	}
	if d.URL != "" {
		s += fmt.Sprintf(" (%s:%d)", d.URL, d.LineNumber+1)
	}
	return s
}

// allowConsoleError makes console errors containing substr expected: they neither fail
// the test nor show in takeConsoleErrors. For what a page logs on purpose; an HTTP
// error status needs no allowing (see onEvent).
func (b *tab) allowConsoleError(substr string) {
	b.mu.Lock()
	b.allowed = append(b.allowed, substr)
	b.mu.Unlock()
}

// takeViolations returns the cross-origin requests recorded so far and forgets them,
// for a test that provokes one on purpose.
func (b *tab) takeViolations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.violations
	b.violations = nil
	return v
}

// takeConsoleErrors returns the console errors recorded so far that are not allowed,
// and forgets them all.
func (b *tab) takeConsoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.unexpectedLocked()
	b.consoleErr = nil
	return v
}

func (b *tab) unexpectedLocked() []string {
	var out []string
next:
	for _, e := range b.consoleErr {
		for _, a := range b.allowed {
			if strings.Contains(e, a) {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

// report fails the test on every violation and console error left over.
func (b *browser) report() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.violations) > 0 {
		b.t.Errorf("the page requested %d URL(s) outside %s:\n  %s", len(b.violations), b.origin, strings.Join(b.violations, "\n  "))
	}
	if errs := b.unexpectedLocked(); len(errs) > 0 {
		b.t.Errorf("the page logged %d console error(s):\n  %s", len(errs), strings.Join(errs, "\n  "))
	}
}

// run runs the actions in the tab within runTimeout and fails the test on error, with
// the page's URL and, on a timeout, a screenshot of what the page showed.
func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := b.try(runTimeout, actions...); err != nil {
		b.t.Fatal(b.failure(err))
	}
}

// try is run without the failing: it returns the error.
func (b *browser) try(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// runValue is run for one action that returns a value (a method cannot be generic).
func runValue[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, runTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatal(b.failure(err))
	}
	return v
}

// failure describes err for a failed step: what went wrong, where the page was, and,
// when the step timed out (an element that never appeared, a URL never reached), the
// path of a screenshot of the page at that moment.
func (b *browser) failure(err error) string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	where, lerr := chromedp.Run(ctx, chromedp.Location())
	if lerr != nil {
		where = "unknown URL (" + lerr.Error() + ")"
	}
	msg := fmt.Sprintf("browser at %s: %v", where, err)
	if errors.Is(err, context.DeadlineExceeded) {
		shot, serr := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if serr == nil {
			f, ferr := os.CreateTemp(b.shots, "timeout-*.png")
			if ferr == nil {
				_, ferr = f.Write(shot)
				if cerr := f.Close(); ferr == nil {
					ferr = cerr
				}
			}
			serr = ferr
			if serr == nil {
				msg += "\nscreenshot at the timeout: " + f.Name()
			}
		}
		if serr != nil {
			msg += "\nno screenshot: " + serr.Error()
		}
	}
	return msg
}

// navigate loads path (relative to the origin, or a full URL) and waits for its load
// event. Module scripts have run by then; what they fetch afterwards may not have.
func (b *browser) navigate(path string) {
	b.t.Helper()
	u := path
	if !strings.Contains(path, "://") {
		u = b.origin + "/" + strings.TrimPrefix(path, "/")
	}
	b.run(chromedp.Navigate(u))
}

// waitVisible waits until the first element matching the CSS selector is visible.
func (b *browser) waitVisible(sel string) {
	b.t.Helper()
	b.run(chromedp.WaitVisible(chromedp.CSS(sel)))
}

// click clicks the centre of the first element matching sel, with real mouse events,
// once it is visible.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.run(chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// setValue sets the value of the input, textarea or select matching sel at once and
// fires input and change, as a paste would: for long text, where typing is slow.
func (b *browser) setValue(sel, v string) {
	b.t.Helper()
	b.run(chromedp.WaitReady(chromedp.CSS(sel)))
	b.eval(fmt.Sprintf(`(el => { el.value = %s; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); })(document.querySelector(%s))`,
		jsString(v), jsString(sel)), nil)
}

// typeInto empties the field matching sel (firing input) and types text into it key by
// key, as a user would. chromedp.Clear is not used: it clears the value attribute,
// which leaves a field the user already typed in unchanged.
func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	b.setValue(sel, "")
	b.run(chromedp.SendKeys(chromedp.CSS(sel), text))
}

// text returns the rendered text (innerText) of the first element matching sel once it
// exists.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return runValue(b, chromedp.Text(chromedp.CSS(sel)))
}

// eval evaluates the JavaScript expression in the page, awaits it when it is a promise,
// and decodes its JSON value into out; a nil out discards the value (which then need
// not be serialisable, a DOM node for instance). A throw or a rejection fails the test.
func (b *browser) eval(js string, out any) {
	b.t.Helper()
	if out == nil {
		b.run(chromedp.Evaluate[chromedp.Void](js, chromedp.EvalAwaitPromise, func(p *runtime.EvaluateParams) { p.ReturnByValue = nil }))
		return
	}
	raw := runValue(b, chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
	if len(raw) == 0 {
		b.t.Fatalf("eval %s: the value is undefined or not serialisable", js)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.t.Fatalf("eval %s: decoding %s: %v", js, raw, err)
	}
}

// importModule imports the ES module at path (resolved against the page's URL, as the
// page's own import would) and evaluates expr with the module bound to m, for example
// importModule("/console/assistant.js", "m.suggest('errors by route')", &got). The
// value is awaited and decoded as in eval. It tests a module's functions in the real
// browser with no bundler and no test page.
func (b *browser) importModule(path, expr string, out any) {
	b.t.Helper()
	b.eval(fmt.Sprintf("import(%s).then(m => (%s))", jsString(path), expr), out)
}

// url returns the page's current location.
func (b *browser) url() string {
	b.t.Helper()
	return runValue(b, chromedp.Location())
}

// waitURL waits until the location contains substr. It polls from Go rather than in
// the page, so a full navigation in between (which ends an in-page poll with an
// error) does not matter.
func (b *browser) waitURL(substr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, runTimeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	last := ""
	for {
		// Errors are expected while a navigation swaps documents: poll on.
		if loc, err := chromedp.Run(ctx, chromedp.Location()); err == nil {
			last = loc
			if strings.Contains(loc, substr) {
				return
			}
		}
		select {
		case <-ctx.Done():
			b.t.Fatal(b.failure(fmt.Errorf("waiting for a URL containing %q (last %q): %w", substr, last, ctx.Err())))
		case <-tick.C:
		}
	}
}

// setTheme makes the page's prefers-color-scheme light or dark. The console follows
// the system setting through CSS media queries, so this is how a test sees the dark
// theme. It lasts for the tab, across navigations.
func (b *browser) setTheme(theme string) {
	b.t.Helper()
	if theme != "light" && theme != "dark" {
		b.t.Fatalf("setTheme(%q): want light or dark", theme)
	}
	b.run(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: theme}},
		})
		return err
	}))
	b.theme = theme
}

// screenshot captures the viewport (1280×720) into t.TempDir()/<name>-<theme>.png and,
// with -screenshots, into docs/console/<name>-<theme>.png for the documentation.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if name == "" || strings.ContainsAny(name, `/\`) {
		b.t.Fatalf("screenshot(%q): want a plain file name", name)
	}
	shot := runValue(b, chromedp.CaptureScreenshot())
	file := name + "-" + b.theme + ".png"
	dirs := []string{b.shots}
	if *writeScreenshots {
		dirs = append(dirs, filepath.Join("docs", "console"))
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Fatal(err)
		}
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			b.t.Fatal(err)
		}
		b.t.Logf("screenshot %s", p)
	}
}

// metricsJS waits for the first contentful paint and sums the layout shifts so far.
// Both come from PerformanceObservers with buffered: true: FCP may land after the load
// event that navigate waits for, and layout-shift entries are not in the performance
// timeline that getEntries reads at all, only in observers. takeRecords hands over the
// buffered entries at once, so a page with no shift gives 0 with no wait.
const metricsJS = `(async () => {
	const fcp = await new Promise(resolve => {
		const seen = performance.getEntriesByName('first-contentful-paint')[0];
		if (seen) return resolve(seen.startTime);
		new PerformanceObserver((list, obs) => {
			const e = list.getEntriesByName('first-contentful-paint')[0];
			if (e) { obs.disconnect(); resolve(e.startTime); }
		}).observe({type: 'paint', buffered: true});
	});
	const po = new PerformanceObserver(() => {});
	po.observe({type: 'layout-shift', buffered: true});
	const shifts = po.takeRecords();
	po.disconnect();
	const cls = shifts.filter(e => !e.hadRecentInput).reduce((sum, e) => sum + e.value, 0);
	return {fcp, cls};
})()`

// metrics returns the page's first contentful paint in milliseconds since navigation
// start and its layout shift so far: the sum of every shift not caused by input, an
// upper bound of the Web Vitals CLS (which keeps only the worst 5-second window). A
// page that never paints text or an image has no FCP: metrics then fails at the run
// timeout.
func (b *browser) metrics() (fcpMillis, cls float64) {
	b.t.Helper()
	var m struct{ FCP, CLS float64 }
	b.eval(metricsJS, &m)
	return m.FCP, m.CLS
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

// TestBrowserHarness checks the harness itself on a tiny static site, so a console
// test that fails points at the console, not at the harness: pages render and are
// measured, a clean page records nothing, and the detectors catch a cross-origin
// request and a console error.
func TestBrowserHarness(t *testing.T) {
	mux := http.NewServeMux()
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, "<!doctype html><html><head><meta charset=utf-8><title>harness</title></head><body>%s</body></html>", body)
		}
	}
	mux.HandleFunc("GET /{$}", page(`<h1>Harness</h1><p id="out">waiting</p><input id="name" value="prefilled"><script type="module" src="/app.js"></script>`))
	mux.HandleFunc("GET /app.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `export const answer = 42;
export function double(x) { return 2 * x; }
const r = await fetch('/data.json');
document.querySelector('#out').textContent = (await r.json()).greeting;
`)
	})
	mux.HandleFunc("GET /data.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"greeting": "hello from json"}`)
	})
	// An image on another origin (127.0.0.2 is loopback too, so the request is made
	// and refused at once, and nothing leaves the machine) and a same-origin 404,
	// whose network log entry must not count as a console error.
	mux.HandleFunc("GET /cross", page(`<p>cross</p><img src="http://127.0.0.2:1/x.png"><img src="/missing.png">`))
	// A layout shift after the first paint; the page titles itself once its own
	// observer saw the shift, so the test waits on a fact, not a delay.
	mux.HandleFunc("GET /shift", page(`<p id="p">shifting text</p><script type="module">
new PerformanceObserver(() => { document.title = 'shifted'; }).observe({type: 'layout-shift'});
requestAnimationFrame(() => requestAnimationFrame(() => {
	const d = document.createElement('div');
	d.style.height = '300px';
	document.body.prepend(d);
}));
</script>`))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	b := newBrowser(t, srv.URL)

	t.Run("renders a same-origin page", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/")
		b.waitVisible("h1")
		b.run(chromedp.Poll[chromedp.Void](`document.querySelector('#out').textContent !== 'waiting'`, chromedp.WithPollingTimeout(runTimeout)))
		if got := b.text("#out"); got != "hello from json" {
			t.Errorf("#out = %q, want the fetched greeting", got)
		}
		if got := b.url(); got != srv.URL+"/" {
			t.Errorf("url() = %q, want %q", got, srv.URL+"/")
		}
		b.waitURL(strings.TrimPrefix(srv.URL, "http://"))
		if v := b.takeViolations(); len(v) > 0 {
			t.Errorf("same-origin page recorded violations: %v", v)
		}
		if e := b.takeConsoleErrors(); len(e) > 0 {
			t.Errorf("clean page recorded console errors: %v", e)
		}
	})

	t.Run("metrics of a static page", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/")
		b.waitVisible("h1")
		fcp, cls := b.metrics()
		if fcp <= 0 {
			t.Errorf("FCP = %v ms, want > 0", fcp)
		}
		if cls != 0 {
			t.Errorf("CLS = %v on a static page, want 0", cls)
		}
		t.Logf("FCP %.1f ms, CLS %v", fcp, cls)
	})

	t.Run("metrics see a layout shift", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/shift")
		b.run(chromedp.Poll[chromedp.Void](`document.title === 'shifted'`, chromedp.WithPollingTimeout(runTimeout)))
		if _, cls := b.metrics(); cls <= 0 {
			t.Errorf("CLS = %v after a 300px shift, want > 0", cls)
		}
	})

	t.Run("importModule", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/")
		var got struct {
			Answer  int `json:"answer"`
			Doubled int `json:"doubled"`
		}
		b.importModule("/app.js", "({answer: m.answer, doubled: m.double(21)})", &got)
		if got.Answer != 42 || got.Doubled != 42 {
			t.Errorf("importModule = %+v, want answer 42 and doubled 42", got)
		}
		// Relative to the page, as the page's own imports resolve.
		var n int
		b.importModule("./app.js", "m.double(4)", &n)
		if n != 8 {
			t.Errorf("relative importModule = %d, want 8", n)
		}
	})

	t.Run("typing", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/")
		b.typeInto("#name", "typed")
		var v string
		b.eval(`document.querySelector('#name').value`, &v)
		if v != "typed" {
			t.Errorf("after typeInto, value = %q, want %q", v, "typed")
		}
		b.setValue("#name", "set")
		b.eval(`document.querySelector('#name').value`, &v)
		if v != "set" {
			t.Errorf("after setValue, value = %q, want %q", v, "set")
		}
	})

	t.Run("theme and screenshot", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/")
		for _, theme := range []string{"dark", "light"} {
			b.setTheme(theme)
			var dark bool
			b.eval(`matchMedia('(prefers-color-scheme: dark)').matches`, &dark)
			if dark != (theme == "dark") {
				t.Errorf("setTheme(%s): prefers-color-scheme dark = %v", theme, dark)
			}
		}
		// b.screenshot only without -screenshots, which would put the harness page in docs/.
		if !*writeScreenshots {
			b.screenshot("harness")
			if _, err := os.Stat(filepath.Join(b.shots, "harness-light.png")); err != nil {
				t.Error(err)
			}
		}
		shot := runValue(b, chromedp.CaptureScreenshot())
		cfg, err := png.DecodeConfig(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Width != viewportWidth || cfg.Height != viewportHeight {
			t.Errorf("screenshot is %dx%d, want %dx%d", cfg.Width, cfg.Height, viewportWidth, viewportHeight)
		}
	})

	t.Run("a timeout leaves a screenshot", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/")
		err := b.try(300*time.Millisecond, chromedp.WaitVisible(chromedp.CSS("#never")))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting for a missing element: %v, want a deadline error", err)
		}
		msg := b.failure(err)
		_, path, ok := strings.Cut(msg, "screenshot at the timeout: ")
		if !ok {
			t.Fatalf("failure message has no screenshot: %s", msg)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("failure message names %s: %v", path, err)
		}
		if !strings.Contains(msg, srv.URL) {
			t.Errorf("failure message does not name the page: %s", msg)
		}
	})

	t.Run("detects a cross-origin request", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/cross")
		v := b.takeViolations()
		if len(v) != 1 || v[0] != "http://127.0.0.2:1/x.png" {
			t.Errorf("violations = %q, want the one cross-origin image", v)
		}
		// Both failed loads log a network-source error; neither counts.
		if e := b.takeConsoleErrors(); len(e) > 0 {
			t.Errorf("failed loads recorded console errors: %v", e)
		}
	})

	t.Run("detects console errors", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/")
		b.eval(`console.error("boom")`, nil)
		b.eval(`console.assert(1 === 2, "arithmetic")`, nil)
		// The throw runs in a task before the one that resolves the promise, so its
		// event precedes the evaluation's reply.
		b.eval(`setTimeout(() => { throw new Error("kaboom"); }); new Promise(r => setTimeout(r))`, nil)
		e := b.takeConsoleErrors()
		if len(e) != 3 || !strings.Contains(e[0], "boom") || !strings.Contains(e[1], "arithmetic") || !strings.Contains(e[2], "kaboom") {
			t.Errorf("console errors = %q, want boom, the assertion and kaboom", e)
		}
		b.allowConsoleError("expected failure")
		b.eval(`console.error("an expected failure")`, nil)
		if e := b.takeConsoleErrors(); len(e) > 0 {
			t.Errorf("an allowed error was recorded: %v", e)
		}
	})

	t.Run("sameOrigin", func(t *testing.T) {
		for _, c := range []struct {
			url  string
			want bool
		}{
			{"http://127.0.0.1:8080/a?b#c", true},
			{"ws://127.0.0.1:8080/socket", true},
			{"http://127.0.0.1:8081/", false},
			{"https://127.0.0.1:8080/", false},
			{"http://localhost:8080/", false},
			{"data:image/png;base64,AAAA", false},
			{"blob:http://127.0.0.1:8080/1234", false},
		} {
			if got := sameOrigin("http://127.0.0.1:8080", c.url); got != c.want {
				t.Errorf("sameOrigin(%s) = %v, want %v", c.url, got, c.want)
			}
		}
		if !sameOrigin("http://example.com", "http://example.com:80/x") {
			t.Error("default port not treated as explicit :80")
		}
	})
}
