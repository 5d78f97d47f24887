package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestConsoleResources drives the console pages TestConsoleEndToEnd does not, as a
// demanding user would: members and roles, a second workspace and the switcher,
// warehouse credentials (write-only secrets), a warehouse whose connection test fails,
// a query client with a JWT policy and a runtime key, an Analytics API with two bindings
// and a promotion, a Client CA from a real certificate, an alert built in the editor with
// its live simulation, list filters, disable, enable and archive, a failed delivery
// retried, channel and token states, a model archived, and the keyboard (skip link,
// Escape in a dialog). The harness fails it on any cross-origin request or console error.
func TestConsoleResources(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, freeArgs(dir)...)
	defer p.stop(t)
	rcv := &webhookReceiver{}
	rcv.status.Store(http.StatusInternalServerError)
	hook := httptest.NewServer(rcv)
	defer hook.Close()

	b := newBrowser(t, p.base)
	both := b.capture
	// call is the console API with the browser's session, for fixtures and for checking
	// what a page claims against the server.
	call := func(method, path string, body any) json.RawMessage {
		t.Helper()
		var session string
		b.eval(`localStorage.getItem('lookout.session')`, &session)
		st, env := client{t: t, base: p.base, auth: session}.do(method, "/api/v1"+path, body)
		if st >= 300 {
			t.Fatalf("%s %s: %d %v", method, path, st, env["message"])
		}
		raw, _ := json.Marshal(env["data"])
		return raw
	}
	// selectText picks the option of the select sel whose text is text, as a user would
	// (firing change).
	selectText := func(sel, text string) {
		t.Helper()
		b.waitJS(fmt.Sprintf(`[...document.querySelector(%s).options].some(o => o.textContent === %s)`, jsString(sel), jsString(text)))
		var v string
		b.eval(fmt.Sprintf(`[...document.querySelector(%s).options].find(o => o.textContent === %s).value`, jsString(sel), jsString(text)), &v)
		b.setValue(sel, v)
	}
	noDialog := `!document.querySelector('dialog')`
	// rowOf is a JS expression for the table row whose text contains s.
	rowOf := func(s string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('main tbody tr')].find(tr => tr.innerText.includes(%s))`, jsString(s))
	}
	// clickInRow clicks the button labelled label in the row containing s.
	clickInRow := func(s, label string) {
		t.Helper()
		find := fmt.Sprintf(`[...(%s).querySelectorAll('button')].find(e => e.textContent.trim() === %s && !e.disabled)`, rowOf(s), jsString(label))
		b.waitJS(find)
		b.eval(find+`.click()`, nil)
	}
	keys := func(k string) {
		t.Helper()
		b.run(chromedp.KeyEvent(k))
	}

	// First run, a project, and the models the pages need (made through the API: the
	// model pages are TestConsoleEndToEnd's).
	pid := b.setupShop(nil)
	for _, m := range []map[string]any{
		{"project_id": pid, "key": "audit", "fields": []map[string]any{{"name": "actor", "type": "string"}, {"name": "action", "type": "string"}}},
		{"project_id": pid, "key": "requests", "fields": []map[string]any{{"name": "service", "type": "string"}, {"name": "status", "type": "string"}, {"name": "duration_ms", "type": "integer"}}},
		{"project_id": pid, "key": "legacy", "fields": []map[string]any{{"name": "note", "type": "string"}}},
	} {
		call("POST", "/models", m)
	}

	t.Run("members and workspaces", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/members")
		b.waitJS(`document.querySelectorAll('main tbody tr').length === 1`)
		// Keyboard: the dialog opens on its first field and Escape gives focus back.
		addBtn := `[...document.querySelectorAll('main .page-head button')].find(e => e.textContent === 'Add member')`
		b.eval(addBtn+`.focus()`, nil)
		keys(kb.Enter)
		b.waitJS(`document.querySelector('dialog[open]') && document.activeElement === document.querySelector('dialog input[name=email]')`)
		keys(kb.Escape)
		b.waitJS(noDialog + ` && document.activeElement === ` + addBtn)
		b.clickText("button", "Add member")
		b.typeInto("dialog input[name=email]", "bob@example.com")
		b.typeInto("dialog input[name=name]", "Bob Member")
		b.typeInto("dialog input[name=password]", "another horse battery")
		if v := b.eval2str(`document.querySelector('dialog select[name=role]').value`); v != "member" {
			t.Fatalf("the role defaults to %q", v)
		}
		b.click("dialog button[type=submit]")
		b.waitJS(noDialog + ` && ` + rowOf("bob@example.com"))
		// An owner changes the role inline.
		b.waitJS(rowOf("bob@example.com") + `.querySelector('select').value === 'member'`)
		sel := b.eval2str(rowOf("bob@example.com") + `.querySelector('select').id`)
		b.setValue("#"+sel, "admin")
		b.waitJS(`document.querySelector('#toasts').innerText.includes('Role changed')`)
		var me struct{ Workspaces []struct{ ID string } }
		json.Unmarshal(call("GET", "/me", nil), &me)
		var members []struct{ Email, Role string }
		json.Unmarshal(call("GET", "/workspaces/"+me.Workspaces[0].ID+"/members", nil), &members)
		if fmt.Sprint(members) != "[{ann@example.com owner} {bob@example.com admin}]" && fmt.Sprint(members) != "[{bob@example.com admin} {ann@example.com owner}]" {
			t.Fatalf("members after the role change: %+v", members)
		}
		b.navigate("/members")
		b.waitJS(rowOf("bob@example.com") + `.querySelector('select').value === 'admin'`)
		both("members-roles")
		// Removing asks first.
		clickInRow("bob@example.com", "Remove")
		b.waitJS(`document.querySelector('dialog') && document.querySelector('dialog').innerText.includes('Remove bob@example.com')`)
		b.clickText("dialog button", "Remove")
		b.waitJS(noDialog + ` && document.querySelectorAll('main tbody tr').length === 1 && !document.body.innerText.includes('bob@example.com')`)

		// A new workspace from the Members page, its first project, and the switcher.
		b.clickText("button", "New workspace")
		b.typeInto("dialog input[name=name]", "Research")
		b.click("dialog button[type=submit]")
		b.waitURL("/projects")
		b.waitVisible("dialog input[name=name]")
		b.typeInto("dialog input[name=name]", "Lab")
		b.click("dialog button[type=submit]")
		b.waitJS(`/^\/p\/prj_/.test(location.pathname) && location.pathname.split('/')[2] !== ` + jsString(pid))
		b.waitJS(`document.querySelector('#workspace-switcher').selectedOptions[0].textContent === 'Research'`)
		projects := func(want string) {
			t.Helper()
			b.click(`.sidebar a[href="/projects"]`)
			b.waitJS(`location.pathname === '/projects' && [...document.querySelectorAll('main tbody a')].map(a => a.textContent).join() === ` + jsString(want))
		}
		projects("Lab")
		selectText("#workspace-switcher", "Default")
		b.waitJS(fmt.Sprintf(`location.pathname === %s`, jsString("/p/"+pid)))
		b.waitJS(`document.querySelector('#project-switcher').selectedOptions[0].textContent === 'Shop'`)
		projects("Shop")
		selectText("#workspace-switcher", "Research")
		b.waitJS(`document.querySelector('#project-switcher').selectedOptions[0].textContent === 'Lab'`)
		projects("Lab")
		selectText("#workspace-switcher", "Default")
		b.waitJS(fmt.Sprintf(`location.pathname === %s`, jsString("/p/"+pid)))
		projects("Shop")
	})

	t.Run("credentials", func(t *testing.T) {
		b := b.sub(t)
		const secret = "s3cret-Password-4tsm"
		b.navigate("/p/" + pid + "/credentials")
		b.clickText("button", "New credential")
		b.typeInto("dialog input[name=name]", "analytics-db")
		b.typeInto("dialog input[name=username]", "lookout")
		b.typeInto("dialog input[name=secret]", secret)
		if typ := b.eval2str(`document.querySelector('dialog input[name=secret]').type`); typ != "password" {
			t.Fatalf("the secret is typed into a %s field", typ)
		}
		b.click("dialog button[type=submit]")
		b.waitJS(noDialog + ` && ` + rowOf("analytics-db"))
		if got := b.eval2str(rowOf("analytics-db") + `.innerText`); !strings.Contains(got, "****4tsm") || !strings.Contains(got, "lookout") {
			t.Fatalf("the credential's row reads %q, want the user and the hint ****4tsm", got)
		}
		both("credentials")
		// Editing keeps the secret when the field is left empty.
		clickInRow("analytics-db", "Edit")
		b.waitVisible("dialog input[name=username]")
		if v := b.eval2str(`document.querySelector('dialog input[name=secret]').value`); v != "" {
			t.Fatalf("the edit dialog holds the secret %q", v)
		}
		b.typeInto("dialog input[name=username]", "lookout_ro")
		b.click("dialog button[type=submit]")
		b.waitJS(noDialog + ` && ` + rowOf("lookout_ro") + ` && ` + rowOf("lookout_ro") + `.innerText.includes('****4tsm')`)
		if strings.Contains(b.pageText(), secret) || strings.Contains(b.eval2str(`document.documentElement.outerHTML`), secret) {
			t.Fatal("the credential's secret shows on the page")
		}
		// A second one, whose type the user changes afterwards.
		b.clickText("button", "New credential")
		b.typeInto("dialog input[name=name]", "ch-token")
		b.typeInto("dialog input[name=username]", "svc")
		b.typeInto("dialog input[name=secret]", "tok-0123456789-abcd")
		b.click("dialog button[type=submit]")
		b.waitJS(noDialog + ` && ` + rowOf("ch-token") + ` && ` + rowOf("ch-token") + `.cells[1].innerText === 'password'`)
		clickInRow("ch-token", "Edit")
		b.waitVisible("dialog select[name=type]")
		b.setValue("dialog select[name=type]", "token")
		b.click("dialog button[type=submit]")
		b.waitJS(noDialog + ` && ` + rowOf("ch-token") + `.cells[1].innerText === 'token' && ` + rowOf("ch-token") + `.innerText.includes('****abcd')`)
		// A dialog the user changes their mind about closes with its Cancel button.
		b.clickText("button", "New credential")
		b.typeInto("dialog input[name=name]", "never")
		b.clickText("dialog button", "Cancel")
		b.waitJS(noDialog + ` && !` + rowOf("never"))
	})

	t.Run("warehouses", func(t *testing.T) {
		b := b.sub(t)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close() // a port nothing listens on: the connection is refused
		b.navigate("/p/" + pid + "/warehouses")
		b.waitJS(rowOf("default") + ` && ` + rowOf("default") + `.innerText.includes('embedded')`)
		b.clickText("button", "New warehouse")
		b.typeInto("dialog input[name=name]", "pg")
		if v := b.eval2str(`document.querySelector('dialog select[name=type]').value`); v != "postgres" {
			t.Fatalf("type %q", v)
		}
		b.setValue("dialog textarea[name=config]", fmt.Sprintf(`{"host": "127.0.0.1", "port": %d, "database": "lookout", "sslmode": "disable"}`, port))
		selectText("dialog select[name=credential_id]", "analytics-db (lookout_ro)")
		b.click("dialog button[type=submit]")
		errs := `[...document.querySelectorAll('dialog .form-error, dialog .error')].map(e => e.textContent).join(' ')`
		b.waitJS(errs + `.trim() !== ''`)
		if got := b.eval2str(errs); !strings.Contains(got, "postgres") || !strings.Contains(got, "refused") {
			t.Fatalf("the dialog's errors read %q, want the engine's connection error", got)
		}
		both("warehouse-refused")
		keys(kb.Escape)
		b.waitJS(noDialog)
		if n := len(b.eval2list(`[...document.querySelectorAll('main tbody tr')].map(tr => tr.innerText)`)); n != 1 {
			t.Fatalf("%d warehouses listed after a refused connection, want the embedded one", n)
		}
		var whs []json.RawMessage
		json.Unmarshal(call("GET", "/warehouses?project_id="+pid, nil), &whs)
		if len(whs) != 1 {
			t.Fatalf("%d warehouses stored after a refused connection", len(whs))
		}
	})

	t.Run("analytics API", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/p/" + pid + "/analytics")
		b.clickText("button", "New Analytics API")
		b.typeInto("dialog input[name=key]", "errors_by_service")
		b.typeInto("dialog input[name=name]", "Errors by service")
		selectText("dialog select[name=model_key]", "requests")
		b.setValue("dialog textarea[name=query]", `{"filters": [{"field": "status", "op": "eq", "value": {"param": "status"}}], "group_by": ["service"], "aggregations": [{"fn": "count", "as": "n"}], "order_by": [{"field": "n", "desc": true}], "limit": 10}`)
		b.setValue("dialog textarea[name=params]", `[{"name": "status", "type": "string", "default": "error"}]`)
		b.click("dialog button[type=submit]")
		b.waitJS(noDialog + ` && /\/analytics\/api_/.test(location.pathname)`)
		b.waitJS(`document.body.innerText.includes('No binding yet')`)
		b.clickText("button", "Bind to warehouse")
		b.waitJS(`document.querySelectorAll('main tbody tr').length === 1 && document.querySelector('main tbody .badge').textContent === 'active'`)
		b.clickText("button", "Bind to warehouse")
		b.waitJS(`[...document.querySelectorAll('main tbody .badge')].map(e => e.textContent).join() === 'active,standby'`)
		both("analytics-api")
		clickInRow("standby", "Promote")
		b.waitJS(`document.querySelector('dialog') && document.querySelector('dialog').innerText.includes('Promote binding')`)
		b.clickText("dialog button", "Promote")
		b.waitJS(noDialog + ` && [...document.querySelectorAll('main tbody .badge')].map(e => e.textContent).join() === 'standby,active'`)
	})

	t.Run("query client", func(t *testing.T) {
		b := b.sub(t)
		const jwtSecret = "a-shared-secret-of-at-least-32-bytes!"
		b.navigate("/p/" + pid + "/query-clients")
		b.click("#new-client")
		b.typeInto("dialog input[name=name]", "dashboard")
		b.click(`dialog input[name="models[]"][value=requests]`)
		b.click(`dialog input[name="adhoc_models[]"][value=requests]`)
		b.click(`dialog input[name="analytics_apis[]"][value=errors_by_service]`)
		b.setValue("dialog textarea[name=required_filters]", `[{"field": "service", "op": "eq", "value": "checkout"}]`)
		b.click("dialog button[type=submit]")
		b.waitJS(noDialog + ` && /\/query-clients\/qc_/.test(location.pathname)`)
		var qc struct {
			Models          []string         `json:"models"`
			AdhocModels     []string         `json:"adhoc_models"`
			AnalyticsAPIs   []string         `json:"analytics_apis"`
			RequiredFilters []map[string]any `json:"required_filters"`
		}
		qcID := b.eval2str(`location.pathname.split('/')[4]`)
		raw := call("GET", "/query-clients/"+qcID, nil)
		json.Unmarshal(raw, &qc)
		if fmt.Sprint(qc.Models, qc.AdhocModels, qc.AnalyticsAPIs) != "[requests] [requests] [errors_by_service]" || len(qc.RequiredFilters) != 1 || qc.RequiredFilters[0]["value"] != "checkout" {
			t.Fatalf("the query client is %s", raw)
		}
		b.waitJS(`document.querySelector('main input[name=name]').value === 'dashboard' && document.querySelector('main textarea[name=required_filters]').value.includes('checkout')`)
		// Switched off in its settings, the page says so.
		b.click("main input[name=enabled]")
		b.clickText("main button", "Save")
		b.waitJS(`document.querySelector('#toasts').innerText.includes('Client saved')`)
		b.waitJS(`document.querySelector('.page-head .badge').textContent === 'disabled' && !document.querySelector('main input[name=enabled]').checked`)
		b.click("main input[name=enabled]")
		b.clickText("main button", "Save")
		b.waitJS(`document.querySelector('.page-head .badge').textContent === 'enabled' && document.querySelector('main input[name=enabled]').checked`)

		// The authentication policy: JWT HS256 with a write-only secret.
		b.clickText("[role=tab]", "Authentication")
		b.click(`main input[name="methods[]"][value=jwt]`)
		b.click(`main input[name="jwt_algorithms[]"][value=HS256]`)
		b.typeInto("main input[name=jwt_secret]", jwtSecret)
		b.typeInto("main input[name=jwt_issuer]", "https://id.example.com")
		b.clickText("main button", "Save authentication")
		b.waitJS(`document.querySelector('#toasts').innerText.includes('Authentication saved')`)
		secretSet := `document.querySelector('main [data-field=jwt_secret]').innerText.includes('A secret is set') && document.querySelector('main input[name=jwt_secret]').value === ''`
		b.waitJS(secretSet)
		raw = call("GET", "/query-clients/"+qcID, nil)
		if !strings.Contains(string(raw), `"hs256_secret_set":true`) || strings.Contains(string(raw), jwtSecret) {
			t.Fatalf("the stored policy is %s", raw)
		}
		// Away and back, and after a reload, the page still only says it is set.
		b.clickText("[role=tab]", "Settings")
		b.clickText("[role=tab]", "Authentication")
		b.waitJS(secretSet + ` && document.querySelector('main input[name="methods[]"][value=jwt]').checked`)
		b.navigate("/p/" + pid + "/query-clients/" + qcID + "?tab=Authentication")
		b.waitJS(secretSet)
		if strings.Contains(b.eval2str(`document.documentElement.outerHTML`), jwtSecret) {
			t.Fatal("the JWT secret shows on the page")
		}

		// A runtime key, shown once.
		b.clickText("[role=tab]", "Runtime keys")
		b.click("#new-key")
		b.typeInto("dialog input[name=name]", "dashboards")
		b.click("dialog button[type=submit]")
		b.waitVisible("dialog .secret-value")
		key := b.text("dialog .secret-value")
		if !strings.HasPrefix(key, "lk_ak_") {
			t.Fatalf("the new key is %q", key)
		}
		both("query-client")
		b.clickText("dialog button", "Done")
		b.waitJS(noDialog + ` && ` + rowOf("dashboards"))
		if strings.Contains(b.eval2str(`document.documentElement.outerHTML`), key) {
			t.Fatal("the runtime key shows again after its dialog closed")
		}
		// The key works on the query listener, for the API the client may call.
		body := `{"api": "errors_by_service"}`
		req, _ := http.NewRequest("POST", listenerURL(t, p, "query")+"/query", strings.NewReader(body))
		req.Header.Set("Authorization", "ApiKey "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the query with the console's key: %d %s", resp.StatusCode, out)
		}
	})

	t.Run("client CA", func(t *testing.T) {
		b := b.sub(t)
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		notAfter := time.Now().Add(90 * 24 * time.Hour).UTC().Truncate(time.Second)
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(42),
			Subject:               pkix.Name{CommonName: "Devices CA", Organization: []string{"Example"}},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              notAfter,
			IsCA:                  true,
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		pemText := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		sum := sha256.Sum256(der)
		fp := hex.EncodeToString(sum[:])

		b.navigate("/p/" + pid + "/client-cas")
		b.waitJS(`document.body.innerText.includes('No Client CA yet')`)
		b.clickText("button", "Add Client CA")
		b.typeInto("dialog input[name=name]", "devices")
		b.setValue("dialog textarea[name=certificate_pem]", pemText)
		b.click("dialog button[type=submit]")
		b.waitJS(`document.querySelector('dialog') && document.querySelector('dialog').innerText.includes('CA added')`)
		got := strings.ToLower(b.eval2str(`document.querySelector('dialog').innerText`))
		for _, want := range []string{"cn=devices ca", fp, notAfter.Format("2006-01-02")} {
			if !strings.Contains(got, strings.ToLower(want)) {
				t.Fatalf("the dialog does not show %q:\n%s", want, got)
			}
		}
		both("client-cas")
		b.clickText("dialog button", "Done")
		b.waitJS(noDialog + ` && ` + rowOf("devices") + ` && ` + rowOf("devices") + `.innerText.toLowerCase().includes(` + jsString(fp) + `)`)
		clickInRow("devices", "Delete")
		b.waitJS(`document.querySelector('dialog') && document.querySelector('dialog').innerText.includes('Delete devices?')`)
		b.clickText("dialog button", "Delete")
		b.waitJS(noDialog + ` && document.body.innerText.includes('No Client CA yet')`)
	})

	var chID string
	t.Run("channels and deliveries", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/p/" + pid + "/channels")
		b.click("#new-channel")
		b.typeInto("dialog input[name=name]", "flaky hook")
		b.setValue("dialog textarea[name=config]", fmt.Sprintf(`{"url": %q}`, hook.URL+"/lookout"))
		b.click("dialog button[type=submit]")
		b.waitVisible("dialog .secret-value")
		b.clickText("dialog button", "Close")
		b.waitJS(noDialog + ` && ` + rowOf("flaky hook"))
		// The receiver answers 500: the test delivery fails and says why.
		clickInRow("flaky hook", "Test")
		b.waitJS(`document.querySelector('#test-outcome .badge') && document.querySelector('#test-outcome .badge').textContent === 'failed'`)
		if got := b.eval2str(`document.querySelector('#test-outcome').innerText`); !strings.Contains(got, "500") {
			t.Fatalf("the test outcome reads %q", got)
		}
		b.clickText("dialog button", "Close")
		b.waitJS(noDialog)

		b.navigate("/p/" + pid + "/deliveries")
		b.waitJS(rowOf("failed"))
		row := b.eval2str(rowOf("failed") + `.innerText`)
		if !strings.Contains(row, "500") || !strings.Contains(row, "test") {
			t.Fatalf("the failed delivery reads %q", row)
		}
		both("deliveries-failed")
		rcv.status.Store(http.StatusNoContent)
		clickInRow("failed", "Retry")
		b.waitJS(`document.querySelector('#toasts').innerText.includes('Delivery queued again')`)
		deadline := time.Now().Add(runTimeout)
		for !b.eval2bool(`!!(` + rowOf("delivered") + `)`) {
			if time.Now().After(deadline) {
				t.Fatalf("the retried delivery was not delivered; the page says %s", b.pageText())
			}
			b.clickText("main button", "Refresh")
			time.Sleep(pollInterval)
		}
		if rcv.hits.Load() < 2 {
			t.Fatalf("the receiver got %d requests", rcv.hits.Load())
		}

		// Disable and enable from the list.
		b.navigate("/p/" + pid + "/channels")
		clickInRow("flaky hook", "Disable")
		b.waitJS(rowOf("flaky hook") + `.querySelector('.badge').textContent === 'disabled'`)
		clickInRow("flaky hook", "Enable")
		b.waitJS(rowOf("flaky hook") + `.querySelector('.badge').textContent === 'enabled'`)
		var chs []struct{ ID string }
		json.Unmarshal(call("GET", "/notification-channels?project_id="+pid, nil), &chs)
		chID = chs[0].ID
	})

	t.Run("alerts", func(t *testing.T) {
		b := b.sub(t)
		// A second alert, disabled, for the filters.
		call("POST", "/alerts", map[string]any{"project_id": pid, "name": "Audit deletes", "model_key": "audit",
			"conditions": []map[string]any{{"field": "action", "operator": "eq", "value": "delete"}}, "enabled": false})

		b.navigate("/p/" + pid + "/alerts/new")
		b.waitVisible("main input[name=name]")
		b.typeInto("main input[name=name]", "Slow checkout errors")
		b.typeInto("main input[name=description]", "checkout failing slowly")
		selectText("main select[name=model_key]", "requests")
		b.waitJS(`[...document.querySelector('.c-field').options].some(o => o.value === 'duration_ms') && ![...document.querySelector('.c-field').options].some(o => o.value === 'actor')`)
		// The notification fields follow the model.
		b.waitJS(`document.querySelector('main input[name="select_fields[]"][value=service]') && !document.querySelector('main input[name="select_fields[]"][value=actor]')`)
		b.setValue(".cond-row:nth-child(1) .c-field", "service")
		b.setValue(".cond-row:nth-child(1) .c-op", "eq")
		b.typeInto(".cond-row:nth-child(1) .c-value", "checkout")
		b.click("#add-condition")
		b.waitJS(`document.querySelectorAll('.cond-row').length === 2`)
		b.setValue(".cond-row:nth-child(2) .c-field", "duration_ms")
		b.waitJS(`[...document.querySelector('.cond-row:nth-child(2) .c-op').options].some(o => o.value === 'gt') && ![...document.querySelector('.cond-row:nth-child(2) .c-op').options].some(o => o.value === 'contains')`)
		b.setValue(".cond-row:nth-child(2) .c-op", "gt")
		b.typeInto(".cond-row:nth-child(2) .c-value", "500")
		b.click(`main input[name="select_fields[]"][value=service]`)
		b.click(`main input[name="channel_ids[]"][value="` + chID + `"]`)
		selectText("main select[name=severity]", "critical")
		b.setValue(".card:has(#simulation) textarea", `{"service": "checkout", "duration_ms": 900}`)
		b.waitJS(`document.querySelectorAll('#simulation-result .explain li').length === 2 && document.querySelector('#simulation-result').innerText.includes('The event matches')`)
		expl := b.eval2list(`[...document.querySelectorAll('#simulation-result .explain li')].map(li => li.innerText)`)
		if !strings.Contains(expl[0], "service") || !strings.Contains(expl[0], "checkout") || !strings.Contains(expl[1], "900") || !strings.Contains(expl[1], "500") {
			t.Fatalf("the simulation explains %q", expl)
		}
		b.setValue(".card:has(#simulation) textarea", `{"service": "checkout", "duration_ms": 120}`)
		b.waitJS(`document.querySelector('#simulation-result') && document.querySelector('#simulation-result').innerText.includes('does not match') && [...document.querySelectorAll('#simulation-result .explain .badge')].map(e => e.textContent).join() === 'match,no match'`)
		b.click("main form button[type=submit]")
		b.waitJS(`/\/alerts\/alr_/.test(location.pathname) && document.querySelector('.page-head h1').textContent === 'Slow checkout errors'`)
		aid := b.eval2str(`location.pathname.split('/')[4]`)
		raw := string(call("GET", "/alerts/"+aid, nil))
		for _, want := range []string{`"model_key":"requests"`, `{"field":"service","operator":"eq","value":"checkout"}`, `{"field":"duration_ms","operator":"gt","value":500}`, `"channel_ids":["` + chID + `"]`, `"select_fields":["service"]`, `"severity":"critical"`} {
			if !strings.Contains(raw, want) {
				t.Fatalf("the alert is %s, want %s in it", raw, want)
			}
		}

		// The list's filters narrow it.
		b.navigate("/p/" + pid + "/alerts")
		b.waitJS(`document.querySelectorAll('main tbody tr').length === 2`)
		b.typeInto("main input[type=search]", "SLOW")
		b.clickText("main button", "Filter")
		b.waitJS(`document.querySelectorAll('main tbody tr').length === 1 && ` + rowOf("Slow checkout errors"))
		b.typeInto("main input[type=search]", "")
		selectText("main form[role=search] select", "disabled")
		b.clickText("main button", "Filter")
		b.waitJS(`document.querySelectorAll('main tbody tr').length === 1 && ` + rowOf("Audit deletes"))
		selectText("main form[role=search] select", "enabled")
		b.clickText("main button", "Filter")
		b.waitJS(`document.querySelectorAll('main tbody tr').length === 1 && ` + rowOf("Slow checkout errors"))
		b.typeInto("main input[type=search]", "no such alert")
		b.clickText("main button", "Filter")
		b.waitJS(`document.querySelectorAll('main tbody tr').length === 0 && document.body.innerText.includes('No alert matches')`)
		both("alerts-filtered")

		// Keyboard: the skip link comes first and leads into the page.
		b.navigate("/p/" + pid + "/alerts")
		b.waitJS(`document.querySelectorAll('main tbody tr').length === 2`)
		keys(kb.Tab)
		b.waitJS(`document.activeElement.classList.contains('skip')`)
		keys(kb.Enter)
		b.waitJS(`document.activeElement === document.querySelector('main') || document.querySelector('main').contains(document.activeElement)`)
		keys(kb.Tab)
		b.waitJS(`document.querySelector('main').contains(document.activeElement) && document.activeElement !== document.querySelector('main')`)
		t.Logf("after the skip link, Tab reaches %s", b.eval2str(`document.activeElement.outerHTML.slice(0, 80)`))

		// Disable, enable and archive on the alert's page.
		b.navigate("/p/" + pid + "/alerts/" + aid)
		b.waitJS(`document.querySelector('.page-head .badge').textContent === 'enabled'`)
		b.clickText(".page-head button", "Disable")
		b.waitJS(`document.querySelector('.page-head .badge').textContent === 'disabled'`)
		b.clickText(".page-head button", "Enable")
		b.waitJS(`document.querySelector('.page-head .badge').textContent === 'enabled'`)
		b.clickText(".page-head button", "Archive")
		b.waitJS(`document.querySelector('dialog') && document.querySelector('dialog').innerText.includes('Archive Slow checkout errors?')`)
		b.clickText("dialog button", "Archive")
		b.waitJS(noDialog + ` && location.pathname.endsWith('/alerts') && ` + rowOf("Slow checkout errors"))
		b.waitJS(`[...(` + rowOf("Slow checkout errors") + `).querySelectorAll('.badge')].some(e => e.textContent === 'archived')`)
		b.navigate("/p/" + pid + "/alerts/" + aid)
		b.waitJS(`document.querySelector('.page-head .badge').textContent === 'archived' && document.querySelector('main form button[type=submit]').disabled`)
	})

	t.Run("tokens", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/tokens")
		b.click("#new-token")
		b.typeInto("dialog input[name=name]", "nightly")
		b.click(`dialog input[value="alerts:read"]`)
		b.click("dialog button[type=submit]")
		b.waitVisible("dialog .secret-value")
		b.clickText("dialog button", "Done")
		b.waitJS(noDialog + ` && ` + rowOf("nightly") + `.querySelector('.badge').textContent === 'enabled'`)
		clickInRow("nightly", "Disable")
		b.waitJS(rowOf("nightly") + `.querySelector('.badge').textContent === 'disabled'`)
		clickInRow("nightly", "Enable")
		b.waitJS(rowOf("nightly") + `.querySelector('.badge').textContent === 'enabled'`)

		// Keyboard: a dialog opened from a button closes with Escape, and focus goes back.
		b.eval(`document.querySelector('#new-token').focus()`, nil)
		keys(kb.Enter)
		b.waitJS(`document.querySelector('dialog[open]') && document.querySelector('dialog').contains(document.activeElement)`)
		keys(kb.Escape)
		b.waitJS(noDialog + ` && document.activeElement === document.querySelector('#new-token')`)

		clickInRow("nightly", "Revoke")
		b.waitJS(`document.querySelector('dialog') && document.querySelector('dialog').innerText.includes('Revoke nightly?')`)
		b.clickText("dialog button", "Revoke")
		b.waitJS(noDialog + ` && ` + rowOf("nightly") + `.querySelector('.badge').textContent === 'revoked' && !` + rowOf("nightly") + `.querySelector('button')`)
		both("tokens-states")
	})

	t.Run("model archive", func(t *testing.T) {
		b := b.sub(t)
		b.navigate("/p/" + pid + "/models")
		b.waitJS(rowOf("legacy"))
		b.eval(rowOf("legacy")+`.querySelector('a').click()`, nil)
		b.waitJS(`document.querySelector('main input[name=key]') && document.querySelector('main input[name=key]').value === 'legacy'`)
		b.clickText(".page-head button", "Archive")
		b.waitJS(`document.querySelector('dialog') && document.querySelector('dialog').innerText.includes('Archive legacy?')`)
		b.clickText("dialog button", "Archive")
		b.waitJS(noDialog + ` && location.pathname.endsWith('/models') && ` + rowOf("legacy") + `.querySelector('.badge').textContent === 'archived'`)
		b.eval(rowOf("legacy")+`.querySelector('a').click()`, nil)
		b.waitJS(`document.querySelector('.page-head .badge') && document.querySelector('.page-head .badge').textContent === 'archived' && !document.querySelector('.page-head button')`)
		b.waitJS(`[...document.querySelectorAll('main form input, main form select, main form textarea, main form button')].every(e => e.disabled)`)
		both("model-archived")
	})
}

// eval2str evaluates a string expression.
func (b *browser) eval2str(js string) string {
	b.t.Helper()
	var v string
	b.eval(js, &v)
	return v
}

// eval2list evaluates an expression giving a list of strings.
func (b *browser) eval2list(js string) []string {
	b.t.Helper()
	var v []string
	b.eval(js, &v)
	return v
}
