package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lookout/store"
)

// binary is the real lookout, built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lookout-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "lookout")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running `lookout serve`.
type proc struct {
	cmd     *exec.Cmd
	base    string
	urls    map[string]string // listener name -> URL
	stdout  *bufio.Reader
	mu      sync.Mutex
	stderr  bytes.Buffer
	msgs    map[string]chan struct{} // log message -> closed once logged
	exited  chan struct{}
	waitErr error
}

// startServe runs the binary with args and waits until its three listeners are up.
func startServe(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), "LOOKOUT_MASTER_KEY=")
	out, _ := cmd.StdoutPipe()
	errp, _ := cmd.StderrPipe()
	p := &proc{cmd: cmd, stdout: bufio.NewReader(out), exited: make(chan struct{}), urls: map[string]string{}, msgs: map[string]chan struct{}{}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errp)
		n := 0
		for sc.Scan() {
			line := sc.Bytes()
			p.mu.Lock()
			p.stderr.Write(append(line, '\n'))
			p.mu.Unlock()
			var rec struct{ Msg, Listener, URL string }
			if json.Unmarshal(line, &rec) == nil {
				p.markLogged(rec.Msg)
			}
			if rec.Msg == "listening" {
				p.mu.Lock()
				p.urls[rec.Listener] = rec.URL
				p.mu.Unlock()
				if rec.Listener == "console" {
					p.base = rec.URL
				}
				if n++; n == 3 {
					ready <- p.base
				}
			}
		}
	}()
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.exited })
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("serve exited early: %v\n%s", p.waitErr, p.logs())
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not start:\n%s", p.logs())
	}
	return p
}

func (p *proc) logs() string { p.mu.Lock(); defer p.mu.Unlock(); return p.stderr.String() }

// logged returns a channel that is closed once the server has logged msg: tests order
// their steps on what the server says it did, never on sleeps.
func (p *proc) logged(msg string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.msgChan(msg)
}

// markLogged closes msg's channel the first time msg is logged.
func (p *proc) markLogged(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := p.msgChan(msg)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (p *proc) msgChan(msg string) chan struct{} {
	ch := p.msgs[msg]
	if ch == nil {
		ch = make(chan struct{})
		p.msgs[msg] = ch
	}
	return ch
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			t.Fatalf("serve exited with %v\n%s", p.waitErr, p.logs())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}

// run runs a lookout command and returns its stdout; it fails the test on a non-zero exit
// unless wantErr.
func run(t *testing.T, stdin string, wantErr bool, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if (err != nil) != wantErr {
		t.Fatalf("lookout %v: err=%v stdout=%s stderr=%s", args, err, out.String(), errb.String())
	}
	return out.String() + errb.String()
}

type client struct {
	t    *testing.T
	base string
	auth string
}

func (c client) do(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", "Bearer "+c.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var env map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		c.t.Fatalf("%s %s: undecodable body: %v", method, path, err)
	}
	if _, ok := env["error"].(bool); !ok {
		c.t.Fatalf("%s %s: no boolean error field: %v", method, path, env)
	}
	return resp.StatusCode, env
}

// create POSTs a Management resource and returns its data, failing the test on any
// answer but 201.
func (c client) create(path string, body map[string]any) map[string]any {
	c.t.Helper()
	st, env := c.do("POST", "/management/v1"+path, body)
	if st != 201 {
		c.t.Fatalf("POST %s: %d %v", path, st, env)
	}
	return env["data"].(map[string]any)
}

func field(env map[string]any, path ...string) string {
	var v any = env
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

func TestEphemeralEndToEnd(t *testing.T) {
	start := time.Now()
	cmd := exec.Command(binary, "serve", "--ephemeral", "--log-level", "warn")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fixture line after %s", time.Since(start))
	var fx map[string]string
	if err := json.Unmarshal(line, &fx); err != nil {
		t.Fatalf("fixture line %q: %v", line, err)
	}
	for _, k := range []string{"base_url", "ingest_url", "query_url", "data_dir", "workspace_id", "owner_email", "owner_password", "management_token"} {
		if fx[k] == "" {
			t.Fatalf("fixture lacks %s: %s", k, line)
		}
	}
	for _, u := range []string{fx["base_url"], fx["ingest_url"], fx["query_url"]} {
		resp, err := http.Get(u + "/readyz")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s/readyz: %v", u, err)
		}
		resp.Body.Close()
	}

	anon := client{t: t, base: fx["base_url"]}
	st, env := anon.do("POST", "/api/v1/auth/register", map[string]any{"email": "late@example.com", "password": "password123"})
	if st != 403 {
		t.Fatalf("register on an owned instance: %d %v", st, env)
	}
	st, env = anon.do("POST", "/api/v1/auth/login", map[string]any{"email": fx["owner_email"], "password": fx["owner_password"]})
	if st != 200 {
		t.Fatalf("login: %d %v", st, env)
	}
	console := client{t: t, base: fx["base_url"], auth: field(env, "data", "token")}
	st, env = console.do("POST", "/api/v1/management-tokens", map[string]any{
		"name": "e2e", "workspace_id": fx["workspace_id"], "scopes": []string{"projects:read", "projects:write"},
	})
	if st != 201 {
		t.Fatalf("create token: %d %v", st, env)
	}
	mgmt := client{t: t, base: fx["base_url"], auth: field(env, "data", "token")}

	st, env = mgmt.do("POST", "/management/v1/projects", map[string]any{"workspace_id": fx["workspace_id"], "name": "E2E", "description": "first"})
	if st != 201 {
		t.Fatalf("create project: %d %v", st, env)
	}
	id := field(env, "data", "id")
	if !strings.HasPrefix(id, "prj_") || len(id) != 30 {
		t.Fatalf("project id %q", id)
	}
	if st, env = mgmt.do("GET", "/management/v1/projects/"+id, nil); st != 200 || field(env, "data", "name") != "E2E" {
		t.Fatalf("read: %d %v", st, env)
	}
	if st, env = mgmt.do("PUT", "/management/v1/projects/"+id, map[string]any{"name": "E2E renamed", "access_mode": "restricted"}); st != 200 || field(env, "data", "access_mode") != "restricted" {
		t.Fatalf("update: %d %v", st, env)
	}
	if st, env = mgmt.do("GET", "/management/v1/projects?workspace_id="+fx["workspace_id"], nil); st != 200 || len(env["data"].([]any)) != 1 {
		t.Fatalf("list: %d %v", st, env)
	}
	// The fixture's own token works too, and the console sees the same project.
	fixtureMgmt := client{t: t, base: fx["base_url"], auth: fx["management_token"]}
	if st, _ = fixtureMgmt.do("GET", "/management/v1/projects/"+id, nil); st != 200 {
		t.Fatalf("fixture token: %d", st)
	}
	if st, _ = console.do("GET", "/api/v1/projects/"+id, nil); st != 200 {
		t.Fatalf("console read: %d", st)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if _, err := os.Stat(fx["data_dir"]); !os.IsNotExist(err) {
		t.Fatalf("ephemeral data dir left behind: %v", err)
	}
}

// bootstrap makes an owner and an all-scopes token offline, as an operator would.
func bootstrap(t *testing.T, dir string) (token, workspace string) {
	out := run(t, "s3cret-password\n", false, "admin", "create-owner", "--data-dir", dir, "--email", "ops@example.com", "--password-stdin")
	var created map[string]string
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("create-owner output %q", out)
	}
	token = strings.TrimSpace(run(t, "", false, "token", "create", "--data-dir", dir, "--email", "ops@example.com", "--scopes", "all"))
	return token, created["workspace_id"]
}

func freeArgs(dir string) []string {
	return []string{"--data-dir", dir, "--addr", "127.0.0.1:0", "--ingest-addr", "127.0.0.1:0", "--query-addr", "127.0.0.1:0"}
}

// TestKill9KeepsEveryAcknowledgedWrite kills serve with SIGKILL in the middle of a burst of
// project writes (after a random number of them were acknowledged, so the kill lands
// mid-burst whatever the machine's speed), restarts it, and checks every write that got a
// 2xx is there and intact.
func TestKill9KeepsEveryAcknowledgedWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	token, ws := bootstrap(t, dir)
	acked := map[string]string{} // id -> name
	var mu sync.Mutex
	for round := 0; round < 3; round++ {
		p := startServe(t, freeArgs(dir)...)
		c := client{t: t, base: p.base, auth: token}
		stop := make(chan struct{})
		target, writes := 20+rand.IntN(60), 0
		reached := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					name := fmt.Sprintf("r%d-g%d-%d", round, g, i)
					raw, _ := json.Marshal(map[string]any{"workspace_id": ws, "name": name})
					req, _ := http.NewRequest("POST", c.base+"/management/v1/projects", bytes.NewReader(raw))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						return // the server is gone
					}
					var env struct {
						Data struct{ ID string } `json:"data"`
					}
					json.NewDecoder(resp.Body).Decode(&env)
					resp.Body.Close()
					if resp.StatusCode == 201 {
						mu.Lock()
						acked[env.Data.ID] = name
						if writes++; writes == target {
							close(reached)
						}
						mu.Unlock()
					}
				}
			}(g)
		}
		select {
		case <-reached:
		case <-p.exited:
			t.Fatalf("serve exited: %v\n%s", p.waitErr, p.logs())
		}
		p.cmd.Process.Kill() // SIGKILL: no shutdown code runs
		<-p.exited
		close(stop)
		wg.Wait()
	}
	p := startServe(t, freeArgs(dir)...)
	c := client{t: t, base: p.base, auth: token}
	for id, name := range acked {
		st, env := c.do("GET", "/management/v1/projects/"+id, nil)
		if st != 200 || field(env, "data", "name") != name {
			t.Fatalf("acknowledged project %s (%s) lost: %d %v", id, name, st, env)
		}
	}
	// check runs through the admin socket while serve holds the file.
	if out := run(t, "", false, "check", "--data-dir", dir); !strings.Contains(out, "ok") {
		t.Fatalf("check while serving: %s", out)
	}
	p.stop(t)
	if out := run(t, "", false, "check", "--data-dir", dir); !strings.Contains(out, "ok") {
		t.Fatalf("check offline: %s", out)
	}
	t.Logf("%d acknowledged writes survived 3 SIGKILLs", len(acked))
}

func TestSecondServeFailsAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	startServe(t, freeArgs(dir)...)
	start := time.Now()
	out := run(t, "", true, append([]string{"serve"}, freeArgs(dir)...)...)
	if !strings.Contains(out, "in use by another process") {
		t.Fatalf("second serve said %q", out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("second serve took %s to fail", d)
	}
}

func TestOnlineBackupAndAdminSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	token, ws := bootstrap(t, dir)
	p := startServe(t, freeArgs(dir)...)
	c := client{t: t, base: p.base, auth: token}
	st, env := c.do("POST", "/management/v1/projects", map[string]any{"workspace_id": ws, "name": "Backed up"})
	if st != 201 {
		t.Fatal(env)
	}
	id := field(env, "data", "id")
	// Through the socket while serving: a second owner, a token for it, a backup.
	run(t, "another-password\n", false, "admin", "create-owner", "--data-dir", dir, "--email", "two@example.com", "--password-stdin")
	// No --workspace: online as offline, it defaults to the account's only workspace.
	tok2 := strings.TrimSpace(run(t, "", false, "token", "create", "--data-dir", dir, "--email", "ops@example.com", "--scopes", "projects:read", "--projects", id))
	if st, _ := (client{t: t, base: p.base, auth: tok2}).do("GET", "/management/v1/projects/"+id, nil); st != 200 {
		t.Fatalf("token made through the socket: %d", st)
	}
	// Some ingested records, so the backup has a warehouse file to copy.
	st, env = c.do("POST", "/management/v1/models", map[string]any{"project_id": id, "key": "events", "fields": []map[string]any{{"name": "n", "type": "integer"}}})
	if st != 201 {
		t.Fatal(env)
	}
	model, warehouse := field(env, "data", "id"), field(env, "data", "warehouse_id")
	st, env = c.do("POST", "/management/v1/ingest-clients", map[string]any{"project_id": id, "name": "in", "models": []string{"events"}})
	ic := field(env, "data", "id")
	_, env = c.do("POST", "/management/v1/runtime-api-keys", map[string]any{"project_id": id, "name": "k", "kind": "ingest", "client_id": ic})
	req, _ := http.NewRequest("POST", listenerURL(t, p, "ingest")+"/ingest?schema=events", strings.NewReader("{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"))
	req.Header.Set("Authorization", "ApiKey "+field(env, "data", "key"))
	req.Header.Set("Content-Type", "application/x-ndjson")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 202 {
		t.Fatalf("ingest: %v %v", err, resp)
	}
	out := filepath.Join(t.TempDir(), "backup")
	said := run(t, "", false, "backup", "--data-dir", dir, "--out", out)
	// Each file with its own size, then the total: never the total as the main file's size.
	dbInfo, _ := os.Stat(filepath.Join(out, "lookout.db"))
	whInfo, _ := os.Stat(filepath.Join(out, "warehouses", warehouse+".db"))
	if dbInfo == nil || whInfo == nil {
		t.Fatalf("backup set incomplete: %s", said)
	}
	for _, want := range []string{
		fmt.Sprintf("lookout.db\t%d bytes\n", dbInfo.Size()),
		fmt.Sprintf("warehouses/%s.db\t%d bytes\n", warehouse, whInfo.Size()),
		fmt.Sprintf("2 files, %d bytes", dbInfo.Size()+whInfo.Size()),
	} {
		if !strings.Contains(said, want) {
			t.Fatalf("backup said %q, want %q", said, want)
		}
	}
	if sums, _ := os.ReadFile(filepath.Join(out, "SHA256SUMS")); !strings.Contains(string(sums), "  warehouses/"+warehouse+".db\n") {
		t.Fatalf("SHA256SUMS: %s", sums)
	}
	// The backup directory is laid out like a data dir: check reads it as one.
	if said := run(t, "", false, "check", "--data-dir", out, "--master-key-file", filepath.Join(dir, "lookout.key")); !strings.Contains(said, "ok") {
		t.Fatalf("check of the backup: %s", said)
	}
	wl := openWarehouse(t, out, warehouse)
	if n, _ := wl.Count(model); n != 3 {
		t.Fatalf("backup holds %d records, want 3", n)
	}
	b, err := store.Open(filepath.Join(out, "lookout.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, err := b.Project(id); err != nil || got.Name != "Backed up" {
		t.Fatalf("backup lacks the project: %v", err)
	}
	if problems, err := b.Check(); err != nil || len(problems) > 0 {
		t.Fatalf("backup check: %v %v", problems, err)
	}
	info, _ := os.Stat(filepath.Join(dir, "lookout.sock"))
	if info == nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket mode: %v", info)
	}
	p.stop(t)
	if _, err := os.Stat(filepath.Join(dir, "lookout.sock")); !os.IsNotExist(err) {
		t.Fatal("socket left after clean shutdown")
	}
}

func TestGracefulShutdownDrainsInFlight(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	token, ws := bootstrap(t, dir)
	p := startServe(t, freeArgs(dir)...)
	// A slow upload is in flight when SIGTERM arrives; it must still be answered. With
	// "Expect: 100-continue" the server says when the handler starts reading the body
	// (Got100Continue), and the server's log says when it starts shutting down: each step
	// waits for the previous one to have happened, not for a while.
	pr, pw := io.Pipe()
	reading := make(chan struct{})
	trace := &httptrace.ClientTrace{Got100Continue: func() { close(reading) }}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", p.base+"/management/v1/projects", pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Expect", "100-continue")
	req.ContentLength = -1
	c := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Hour}}
	done := make(chan int, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case <-reading:
	case st := <-done:
		t.Fatalf("answered %d before the body was sent", st)
	}
	pw.Write([]byte(`{"workspace_id":"` + ws + `",`))
	shutting := p.logged("shutting down: draining in-flight requests")
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-shutting
	pw.Write([]byte(`"name":"late"}`))
	pw.Close()
	if st := <-done; st != 201 {
		t.Fatalf("in-flight request got %d", st)
	}
	<-p.exited
	if p.waitErr != nil {
		t.Fatalf("exit: %v", p.waitErr)
	}
}

func TestEnvOverridesFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(binary, "serve", "--data-dir", dir, "--ingest-addr", "127.0.0.1:0", "--query-addr", "127.0.0.1:0", "--log-format", "json")
	cmd.Env = append(os.Environ(), "LOOKOUT_ADDR=127.0.0.1:0", "LOOKOUT_LOG_LEVEL=nonsense")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "--log-level") {
		t.Fatalf("LOOKOUT_LOG_LEVEL not applied: %s", out)
	}
}

func listenerURL(t *testing.T, p *proc, name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.urls[name]
	if u == "" {
		t.Fatalf("no %s listener", name)
	}
	return u
}
