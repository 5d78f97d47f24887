package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// waitJS polls a JavaScript condition in the page until it is true (bounded by the
// harness's run timeout): the console renders after its API calls answer, so a test
// waits for what the user would see rather than for a fixed time.
func (b *browser) waitJS(cond string) {
	b.t.Helper()
	deadline := time.Now().Add(runTimeout)
	for {
		var ok bool
		b.eval(fmt.Sprintf("(() => { try { return !!(%s); } catch (e) { return false; } })()", cond), &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			b.eval("document.body.innerText.slice(0, 2000)", &text)
			b.t.Fatal(b.failure(fmt.Errorf("waiting for %s; the page says:\n%s", cond, text)))
		}
		time.Sleep(pollInterval)
	}
}

// clickText clicks the first visible element of the selector whose text is text.
func (b *browser) clickText(sel, text string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("[...document.querySelectorAll(%s)].some(e => e.textContent.trim() === %s && e.offsetParent !== null && !e.disabled)", jsString(sel), jsString(text)))
	b.eval(fmt.Sprintf("[...document.querySelectorAll(%s)].find(e => e.textContent.trim() === %s && e.offsetParent !== null && !e.disabled).click()", jsString(sel), jsString(text)), nil)
}

// pageText is the main area's rendered text.
func (b *browser) pageText() string {
	b.t.Helper()
	var s string
	b.eval("document.body.innerText", &s)
	return s
}

// webhookReceiver is a real HTTP receiver for a channel's deliveries; it answers the
// status the test sets (204 until then) and counts what it got.
type webhookReceiver struct {
	status atomic.Int32
	hits   atomic.Int32
}

func (rcv *webhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	rcv.hits.Add(1)
	st := int(rcv.status.Load())
	if st == 0 {
		st = http.StatusNoContent
	}
	w.WriteHeader(st)
}

// capture checks the page's labels and text, then screenshots it in both themes.
func (b *browser) capture(name string) {
	b.t.Helper()
	b.checkLabels(name)
	for _, theme := range []string{"dark", "light"} {
		b.setTheme(theme)
		b.screenshot(name)
	}
}

// TestConsoleEndToEnd drives the real binary's console in Chromium, as a new user would:
// first-run setup, a project, a model, an ingest client and its key, records sent over
// HTTP, an alert drafted by the assistant, simulated and created, the incident it opens
// acknowledged and resolved; a Management Token whose secret shows once; a session that
// ends sends the user to sign in and back; the playground charts the data. Every page is
// captured in both themes, every request must stay on the console's origin, and a console
// error fails the test (the harness checks both at cleanup).
func TestConsoleEndToEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, freeArgs(dir)...)
	defer p.stop(t)
	ingestURL := listenerURL(t, p, "ingest")
	rcv := &webhookReceiver{}
	hook := httptest.NewServer(rcv)
	defer hook.Close()

	b := newBrowser(t, p.base)
	both := b.capture

	pid := b.setupShop(both)
	b.waitJS(`document.querySelector('#stat-records').textContent !== '—'`)

	// A model with four fields.
	b.navigate("/p/" + pid + "/models/new")
	b.waitVisible("input[name=key]")
	b.typeInto("input[name=key]", "requests")
	fields := [][2]string{{"service", "string"}, {"status", "string"}, {"duration_ms", "integer"}, {"path", "string"}}
	for i, f := range fields {
		if i > 0 {
			b.click("#add-field")
		}
		row := fmt.Sprintf("tbody tr:nth-child(%d)", i+1)
		b.typeInto(row+" .f-name", f[0])
		b.setValue(row+" .f-type", f[1])
	}
	both("model-new")
	b.click("form button[type=submit]")
	b.waitJS(`/\/models\/mdl_/.test(location.pathname)`)
	b.waitJS(`document.querySelectorAll('tbody tr[data-locked="1"]').length === 4`)
	both("model-edit")

	// An ingest client allowed to write the model, and its key, shown once.
	b.navigate("/p/" + pid + "/ingest-clients")
	b.click("#new-client")
	b.typeInto("dialog input[name=name]", "checkout-svc")
	b.click(`dialog input[value=requests]`)
	b.click("dialog button[type=submit]")
	b.waitJS(`/\/ingest-clients\/ic_/.test(location.pathname)`)
	b.clickText("[role=tab]", "Runtime keys")
	b.click("#new-key")
	b.typeInto("dialog input[name=name]", "production")
	b.click("dialog button[type=submit]")
	b.waitVisible("dialog .secret-value")
	key := b.text("dialog .secret-value")
	if !strings.HasPrefix(key, "lk_ak_") {
		t.Fatalf("the new key is %q", key)
	}
	b.clickText("dialog button", "Done")
	b.clickText("[role=tab]", "Send data")
	b.waitJS(fmt.Sprintf("document.body.innerText.includes(%s)", jsString(ingestURL+"/ingest")))
	both("ingest-client")
	// The curl example works as shown: its URL and body, with the key, are accepted.
	var curl string
	b.eval(`document.querySelector('[role=tabpanel] pre').textContent`, &curl)
	m := regexp.MustCompile(`curl -s -X POST '([^']+)'[^\n]*\n(?:.*\n)*?\s*-d '([^']+)'`).FindStringSubmatch(curl)
	if m == nil {
		t.Fatalf("no URL and body in the curl example:\n%s", curl)
	}
	exReq, _ := http.NewRequest("POST", m[1], strings.NewReader(m[2]))
	exReq.Header.Set("Authorization", "ApiKey "+key)
	exReq.Header.Set("Content-Type", "application/json")
	exResp, err := http.DefaultClient.Do(exReq)
	if err != nil {
		t.Fatal(err)
	}
	exBody, _ := io.ReadAll(exResp.Body)
	exResp.Body.Close()
	if exResp.StatusCode != 202 {
		t.Fatalf("the curl example's request: %d %s", exResp.StatusCode, exBody)
	}
	b.clickText("[role=tab]", "OpenAPI")
	b.waitJS(`document.querySelector('#openapi-doc') && document.querySelector('#openapi-doc').textContent.includes('"openapi": "3.1.0"')`)
	if strings.Contains(b.pageText(), key) {
		t.Fatal("the runtime key shows again after its dialog closed")
	}

	// Discovery: a session waits for the client, samples arrive while the page watches,
	// and accepting makes the model.
	b.navigate("/p/" + pid + "/discovery")
	b.clickText("button", "New session")
	b.typeInto("dialog input[name=model_key]", "signups")
	b.click("dialog button[type=submit]")
	b.waitJS(`/\/discovery\/dsc_/.test(location.pathname) && document.body.innerText.includes('Listening: 0 sample')`)
	disc, _ := http.NewRequest("POST", ingestURL+"/discover", strings.NewReader(`[{"email":"a@example.com","age":31},{"email":"b@example.com","plan":"pro"}]`))
	disc.Header.Set("Authorization", "ApiKey "+key)
	disc.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(disc); err != nil || resp.StatusCode != 202 {
		t.Fatalf("discover: %v %v", resp, err)
	}
	b.waitJS(`document.body.innerText.includes('Listening: 2 sample') && [...document.querySelectorAll('tbody td')].some(td => td.textContent === 'email')`)
	both("discovery-session")
	b.clickText("button", "Accept fields")
	b.waitJS(`/\/models\/mdl_/.test(location.pathname) && document.querySelector('input[name=key]').value === 'signups'`)

	// Records over HTTP, with the key the console showed.
	send := func(recs ...map[string]any) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"schema": "requests", "data": recs})
		req, _ := http.NewRequest("POST", ingestURL+"/ingest", bytes.NewReader(body))
		req.Header.Set("Authorization", "ApiKey "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 202 {
			t.Fatalf("ingest: %d %s", resp.StatusCode, out)
		}
	}
	var recs []map[string]any
	for i := 0; i < 60; i++ {
		svc := []string{"checkout", "search", "profile"}[i%3]
		st := []string{"ok", "ok", "error"}[i%3]
		recs = append(recs, map[string]any{"service": svc, "status": st, "duration_ms": 100 + i*7, "path": fmt.Sprintf("/api/%d", i%5)})
	}
	send(recs...)

	// A webhook channel pointing at a real receiver, tested from the console.
	b.navigate("/p/" + pid + "/channels")
	b.click("#new-channel")
	b.typeInto("dialog input[name=name]", "ops hook")
	b.setValue("dialog textarea[name=config]", fmt.Sprintf(`{"url": %q}`, hook.URL+"/lookout"))
	b.click("dialog button[type=submit]")
	b.waitVisible("dialog .secret-value")
	if s := b.text("dialog .secret-value"); !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("signing secret %q", s)
	}
	b.clickText("dialog button", "Close")
	b.clickText("button", "Test")
	b.waitJS(`document.querySelector('#test-outcome') && document.querySelector('#test-outcome').innerText.includes('delivered')`)
	b.clickText("dialog button", "Close")
	both("channels")

	// The assistant drafts an alert from plain words, simulates it, then creates it.
	b.navigate("/p/" + pid + "/alerts/assistant")
	b.waitVisible("textarea")
	b.typeInto("textarea", "critical: errors from checkout slower than 500 ms")
	b.click("#assistant-draft-button")
	b.waitVisible("#assistant-simulate")
	var conds []map[string]any
	b.eval(`(() => [...document.querySelectorAll('#assistant-draft tbody tr')].map(tr => ({field: tr.cells[0].innerText, operator: tr.cells[1].innerText, value: tr.cells[2].innerText})))()`, &conds)
	want := map[string]string{"status": "eq \"error\"", "service": "eq \"checkout\"", "duration_ms": "gt 500"}
	if len(conds) != len(want) {
		t.Fatalf("assistant draft %v", conds)
	}
	for _, c := range conds {
		if want[c["field"].(string)] != c["operator"].(string)+" "+c["value"].(string) {
			t.Fatalf("assistant draft %v, want %v", conds, want)
		}
	}
	if b.eval2bool(`document.querySelector('#assistant-create').disabled`) != true {
		t.Fatal("the assistant offers to create before simulating")
	}
	b.click("#assistant-simulate")
	b.waitJS(`document.querySelector('#simulation-result') && document.querySelector('#simulation-result').innerText.includes('The event matches')`)
	both("alert-assistant")
	b.click("#assistant-create")
	b.waitJS(`/\/alerts\/alr_/.test(location.pathname)`)
	b.waitJS(`document.querySelector('#simulation-result')`)
	both("alert-editor")

	// A matching record opens an incident, which the console acknowledges and resolves.
	send(map[string]any{"service": "checkout", "status": "error", "duration_ms": 950, "path": "/api/pay"})
	b.navigate("/p/" + pid + "/incidents")
	deadline := time.Now().Add(runTimeout)
	for !b.eval2bool(`!!document.querySelector('tbody a[href*="/incidents/inc_"]')`) {
		if time.Now().After(deadline) {
			t.Fatal("no incident appeared")
		}
		b.clickText("button", "Refresh")
		time.Sleep(pollInterval)
	}
	both("incidents")
	b.click(`tbody a[href*="/incidents/inc_"]`)
	b.waitVisible("#acknowledge")
	b.click("#acknowledge")
	b.waitJS(`document.querySelector('.page-head .badge').textContent === 'acknowledged'`)
	both("incident")
	b.click("#resolve")
	b.waitJS(`document.querySelector('.page-head .badge').textContent === 'resolved' && !document.querySelector('#resolve')`)
	b.navigate("/p/" + pid + "/deliveries")
	b.waitJS(`document.querySelectorAll('tbody tr').length >= 2`)
	both("deliveries")
	b.navigate("/p/" + pid + "/alerts")
	b.waitJS(`document.querySelector('tbody a[href*="/alerts/alr_"]')`)
	both("alerts")

	// The playground groups the data and charts it.
	b.navigate("/p/" + pid + "/playground")
	b.waitVisible("#pg-run")
	b.setValue("#pg-group", "service")
	b.click("#pg-run")
	b.waitJS(`document.querySelectorAll('#pg-chart svg rect.chart-bar').length === 4 && document.querySelectorAll('#pg-result tbody tr').length === 4`)
	both("playground")

	// A Management Token: its secret shows once, never again.
	b.navigate("/tokens")
	b.click("#new-token")
	b.typeInto("dialog input[name=name]", "ci")
	b.click(`dialog input[value="projects:read"]`)
	b.click("dialog button[type=submit]")
	b.waitVisible("dialog .secret-value")
	secret := b.text("dialog .secret-value")
	if !strings.HasPrefix(secret, "lk_mgmt_") {
		t.Fatalf("token secret %q", secret)
	}
	b.clickText("dialog button", "Done")
	b.waitJS(`document.querySelectorAll('tbody tr').length === 1`)
	both("tokens")
	b.navigate("/tokens")
	b.waitJS(`document.querySelectorAll('tbody tr').length === 1`)
	if body := b.pageText(); strings.Contains(body, secret) || strings.Contains(body, secret[strings.Index(secret, ".")+1:]) {
		t.Fatal("the token's secret shows again")
	}
	req, _ := http.NewRequest("GET", p.base+"/management/v1/projects?workspace_id=x", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode == 401 {
		t.Fatalf("the token the console showed does not authenticate: %v %v", resp, err)
	}

	// The remaining main pages, for the record.
	for _, pg := range []struct{ name, path, ready string }{
		{"projects", "/projects", `document.querySelector('tbody a')`},
		{"members", "/members", `document.querySelector('tbody tr')`},
		{"models", "/p/" + pid + "/models", `document.querySelector('tbody a')`},
		{"discovery", "/p/" + pid + "/discovery", `document.querySelector('tbody a')`},
		{"warehouses", "/p/" + pid + "/warehouses", `document.querySelector('tbody tr')`},
		{"analytics", "/p/" + pid + "/analytics", `document.querySelector('.page-head h1')`},
		{"settings", "/p/" + pid + "/settings", `document.querySelector('input[name=name]')`},
	} {
		b.navigate(pg.path)
		b.waitJS(pg.ready)
		both(pg.name)
	}

	// The dashboard: first paint within budget, and nothing moves when the data lands.
	b.setTheme("light")
	b.navigate("/p/" + pid)
	b.waitJS(`document.querySelector('#stat-records').textContent === '62' && document.querySelector('#records-chart svg path.chart-line') && document.querySelector('#incidents-chart svg rect.chart-bar') && document.querySelector('#model-stats tbody tr')`)
	fcp, cls := b.metrics()
	t.Logf("dashboard: first contentful paint %.0f ms, cumulative layout shift %.4f", fcp, cls)
	if fcp <= 0 || fcp >= 300 {
		t.Errorf("first contentful paint %.0f ms, want under 300 ms", fcp)
	}
	if cls != 0 {
		t.Errorf("layout shift %.4f when the dashboard's data arrived, want none", cls)
	}
	both("overview")

	// A session that ends sends the user to sign in, then back to the page.
	var session string
	b.eval(`localStorage.getItem('lookout.session')`, &session)
	out, _ := http.NewRequest("POST", p.base+"/api/v1/auth/logout", nil)
	out.Header.Set("Authorization", "Bearer "+session)
	if resp, err := http.DefaultClient.Do(out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("logout: %v %v", resp, err)
	}
	b.click(`.sidebar a[href="/p/` + pid + `/incidents"]`)
	b.waitURL("/login?next=")
	b.waitVisible("input[name=email]")
	both("login")
	b.typeInto("input[name=email]", "ann@example.com")
	b.typeInto("input[name=password]", "correct horse battery staple")
	b.click("form button[type=submit]")
	b.waitJS(fmt.Sprintf("location.pathname === %s", jsString("/p/"+pid+"/incidents")))
	b.waitJS(`document.querySelector('tbody a[href*="/incidents/inc_"]')`)

	if rcv.hits.Load() == 0 {
		t.Error("the webhook receiver got nothing")
	}
	if os.Getenv("LOOKOUT_CONSOLE_PAUSE") != "" {
		t.Logf("console at %s", p.base)
	}
}

// checkLabels fails the test for a form control on the page without an accessible name
// (a label, aria-label or aria-labelledby): the console must work with a screen reader.
func (b *browser) checkLabels(page string) {
	b.t.Helper()
	var missing []string
	b.eval(`[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')].filter(e => {
		if (e.closest('[hidden]') || e.offsetParent === null) return false;
		if (e.tagName === 'BUTTON') return !(e.textContent.trim() || e.getAttribute('aria-label'));
		return !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.getAttribute('aria-labelledby');
	}).map(e => e.outerHTML.slice(0, 120))`, &missing)
	if len(missing) > 0 {
		b.t.Errorf("%s: controls without a label: %q", page, missing)
	}
	// Values that leaked into the page as text: a rendering bug, not data (a null cell of
	// a table is data and is drawn as such).
	var junk []string
	b.eval(`(() => { const out = []; const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
		for (let n = w.nextNode(); n; n = w.nextNode()) {
			const t = n.textContent.trim();
			if (/\b(undefined|NaN)\b|\[object Object\]/.test(t) || (t === 'null' && !n.parentElement.closest('td, pre, code'))) out.push(n.parentElement.tagName + ': ' + t.slice(0, 80));
		}
		return out; })()`, &junk)
	if len(junk) > 0 {
		b.t.Errorf("%s: junk text on the page: %q", page, junk)
	}
}

// setupShop goes through first-run setup as Ann (the owner) and creates the project Shop
// from the dialog setup leads to; it returns the project's id. shot, when set, captures
// the setup page.
func (b *browser) setupShop(shot func(string)) string {
	b.t.Helper()
	b.navigate("/")
	b.waitURL("/setup")
	b.waitVisible("form input[name=email]")
	if shot != nil {
		shot("setup")
	}
	b.typeInto("input[name=name]", "Ann Owner")
	b.typeInto("input[name=email]", "ann@example.com")
	b.typeInto("input[name=password]", "correct horse battery staple")
	b.click("form button[type=submit]")
	b.waitURL("/projects")
	b.waitVisible("dialog input[name=name]")
	b.typeInto("dialog input[name=name]", "Shop")
	b.click("dialog button[type=submit]")
	b.waitJS(`/^\/p\/prj_[0-9A-Z]{26}$/.test(location.pathname)`)
	var pid string
	b.eval("location.pathname.split('/')[2]", &pid)
	return pid
}

// eval2bool evaluates a boolean expression.
func (b *browser) eval2bool(js string) bool {
	b.t.Helper()
	var v bool
	b.eval(js, &v)
	return v
}

// assetPath is the URL of one console file under the page's hashed asset prefix.
func assetPath(b *browser, file string) string {
	b.t.Helper()
	var src string
	b.eval(`document.querySelector('script[type=module]').getAttribute('src')`, &src)
	return strings.TrimSuffix(src, "js/main.js") + file
}

// TestConsoleAssistantCases runs the assistant's parser (http/console/js/assistant.js) in
// the real browser over testdata/console/assistant_cases.json: each plain-words request
// must give exactly the draft written down (model, conditions in order, match, severity),
// the same twice.
func TestConsoleAssistantCases(t *testing.T) {
	raw, err := os.ReadFile("testdata/console/assistant_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
		Cases    []struct {
			Text      string `json:"text"`
			Ref       string `json:"metadata_ref"`
			Preferred string `json:"preferred_model"`
			Want      struct {
				ModelKey    *string          `json:"model_key"`
				Conditions  []map[string]any `json:"conditions"`
				Match       string           `json:"match"`
				Severity    *string          `json:"severity"`
				Ignored     []string         `json:"ignored"`
				MinProblems int              `json:"min_problems"`
			} `json:"want"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 25 {
		t.Fatalf("only %d cases", len(file.Cases))
	}
	p := startServe(t, freeArgs(filepath.Join(t.TempDir(), "data"))...)
	defer p.stop(t)
	b := newBrowser(t, p.base)
	b.navigate("/")
	b.waitURL("/setup")
	type got struct {
		ModelKey   *string          `json:"model_key"`
		Conditions []map[string]any `json:"conditions"`
		Match      string           `json:"match"`
		Severity   *string          `json:"severity"`
		Ignored    []string         `json:"ignored"`
		Problems   []string         `json:"problems"`
		Understood []string         `json:"understood"`
		Again      bool             `json:"again"`
	}
	var results []got
	b.importModule(assetPath(b, "js/assistant.js"), fmt.Sprintf(`(() => { const f = %s; return f.cases.map(c => {
		const md = f.metadata[c.metadata_ref];
		const a = m.parseAlertIntent(c.text, md, c.preferred_model);
		const again = JSON.stringify(m.parseAlertIntent(c.text, md, c.preferred_model)) === JSON.stringify(a);
		return {...a, again};
	}); })()`, raw), &results)
	for i, c := range file.Cases {
		g := results[i]
		w := c.Want
		wantJSON, _ := json.Marshal([]any{w.ModelKey, w.Conditions, w.Match, w.Severity})
		gotJSON, _ := json.Marshal([]any{g.ModelKey, g.Conditions, g.Match, g.Severity})
		if string(wantJSON) != string(gotJSON) {
			t.Errorf("%q:\n got %s\nwant %s\n(understood %q, ignored %q, problems %q)", c.Text, gotJSON, wantJSON, g.Understood, g.Ignored, g.Problems)
		}
		if w.Ignored != nil && strings.Join(w.Ignored, "|") != strings.Join(g.Ignored, "|") {
			t.Errorf("%q: ignored %q, want %q", c.Text, g.Ignored, w.Ignored)
		}
		if len(g.Problems) < w.MinProblems {
			t.Errorf("%q: problems %q, want at least %d", c.Text, g.Problems, w.MinProblems)
		}
		if !g.Again {
			t.Errorf("%q: a second parse differs", c.Text)
		}
	}
}
