// Package testsrv starts real PostgreSQL and ClickHouse servers on loopback for tests, from
// the binaries Debian's packages install (.ci/run installs them). When a binary is missing
// a test skips with a message saying what to install, unless CI is set: then it fails, so
// CI never passes by skipping.
package testsrv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one engine process with its data directory; Stop and Start stop it and start
// it again on the same port and data (for fault tests).
type Server struct {
	Kind     string // "postgres" or "clickhouse"
	Port     int    // PostgreSQL's port, or ClickHouse's HTTP port
	User     string
	Password string
	Database string

	dir  string
	args []string
	bin  string
	cred *syscall.Credential
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	logf *os.File
}

// URL is ClickHouse's HTTP address.
func (s *Server) URL() string { return "http://127.0.0.1:" + strconv.Itoa(s.Port) }

// need finds a server binary, skipping (or under CI failing) the test without it.
func need(t testing.TB, what, pkg string, paths ...string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("%s is not installed (looked for %s): apt-get install -y %s, or run .ci/run", what, strings.Join(paths, ", "), pkg)
	if os.Getenv("CI") != "" {
		t.Fatalf("under CI the %s tests must run: %s", what, msg)
	}
	t.Skip(msg)
	return ""
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// workDir makes a directory the server's account can use (PostgreSQL refuses to run as
// root, so as root it runs as the postgres account).
func workDir(t testing.TB, prefix string, cred *syscall.Credential) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func run(t testing.TB, cred *syscall.Credential, env []string, name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// Postgres starts a PostgreSQL server on a free loopback port with a database "lookout"
// and a password-authenticated superuser; it is stopped when the test ends.
func Postgres(t testing.TB) *Server {
	t.Helper()
	bindir := "/usr/lib/postgresql"
	var bins []string
	if ents, err := os.ReadDir(bindir); err == nil {
		for i := len(ents) - 1; i >= 0; i-- {
			bins = append(bins, filepath.Join(bindir, ents[i].Name(), "bin", "postgres"))
		}
	}
	bin := need(t, "PostgreSQL", "postgresql", append(bins, "/usr/lib/postgresql/15/bin/postgres")...)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs the postgres account: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir := workDir(t, "lookout-pg-", cred)
	s := &Server{Kind: "postgres", User: "lookout", Password: "pg's \"secret\" pw", Database: "lookout", dir: dir, bin: bin, cred: cred, Port: freePort(t)}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(s.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		os.Chown(pw, int(cred.Uid), int(cred.Gid))
	}
	data := filepath.Join(dir, "data")
	run(t, cred, nil, filepath.Join(filepath.Dir(bin), "initdb"), "-D", data, "-U", s.User, "--pwfile="+pw, "--auth=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-sync")
	os.Remove(pw)
	// fsync off: the server is thrown away with the test; Lookout's own durability is what
	// the tests check.
	s.args = []string{"-D", data, "-p", strconv.Itoa(s.Port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"}
	s.Start(t)
	run(t, cred, []string{"PGPASSWORD=" + s.Password}, filepath.Join(filepath.Dir(bin), "createdb"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", s.User, "-w", s.Database)
	return s
}

// ClickHouse starts a ClickHouse server on free loopback ports with a user "lookout" and
// a password; it is stopped when the test ends.
func ClickHouse(t testing.TB) *Server {
	t.Helper()
	bin := need(t, "ClickHouse", "clickhouse-server", "/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server", "/usr/bin/clickhouse")
	dir := workDir(t, "lookout-ch-", nil)
	s := &Server{Kind: "clickhouse", User: "lookout", Password: "ch's \\secret\\ pw", Database: "default", dir: dir, bin: bin, Port: freePort(t)}
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>%[1]s/server.log</log><errorlog>%[1]s/error.log</errorlog></logger>
  <http_port>%[2]d</http_port>
  <tcp_port>%[3]d</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>%[1]s/data/</path>
  <tmp_path>%[1]s/tmp/</tmp_path>
  <user_files_path>%[1]s/user_files/</user_files_path>
  <format_schema_path>%[1]s/format_schemas/</format_schema_path>
  <users_config>%[1]s/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <keep_alive_timeout>1</keep_alive_timeout>
  <shutdown_wait_unfinished>1</shutdown_wait_unfinished>
</yandex>
`, dir, s.Port, freePort(t))
	users := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users>
    <lookout><password>%s</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></lookout>
  </users>
  <quotas><default></default></quotas>
</yandex>
`, xmlEscape(s.Password))
	for name, body := range map[string]string{"config.xml": config, "users.xml": users} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--config-file=" + filepath.Join(dir, "config.xml")}
	if filepath.Base(bin) == "clickhouse" {
		args = append([]string{"server"}, args...)
	}
	s.args = args
	s.Start(t)
	return s
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// Start starts the server (again) and waits until it answers.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(s.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	s.logf = logf
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: a test binary killed by its timeout takes its servers with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.Kind, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	var waitErr error
	go func(done chan struct{}) { waitErr = cmd.Wait(); close(done) }(s.done)
	t.Cleanup(func() { s.Stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for !s.ready() {
		select {
		case <-s.done:
			out, _ := os.ReadFile(filepath.Join(s.dir, "stdout.log"))
			errlog, _ := os.ReadFile(filepath.Join(s.dir, "error.log"))
			t.Fatalf("%s exited at start: %v\n%s\n%s", s.Kind, waitErr, out, errlog)
		case <-time.After(50 * time.Millisecond): // polling an external process until it listens
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start listening on port %d within 60 s", s.Kind, s.Port)
		}
	}
}

// ready reports whether the server answers.
func (s *Server) ready() bool {
	if s.Kind == "clickhouse" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/ping", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	cmd := exec.Command(filepath.Join(filepath.Dir(s.bin), "pg_isready"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-q")
	return cmd.Run() == nil
}

// Stop stops the server and waits for it to exit; stopping a stopped server does nothing.
func (s *Server) Stop(t testing.TB) {
	if s.cmd == nil {
		return
	}
	cmd, done := s.cmd, s.done
	s.cmd = nil
	sig := syscall.SIGTERM
	if s.Kind == "postgres" {
		sig = syscall.SIGINT // "fast" shutdown: SIGTERM would wait for every client to leave
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	s.logf.Close()
}
