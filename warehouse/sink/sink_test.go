package sink

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"lookout/internal/testclock"
	"lookout/internal/testsrv"
	"lookout/store"
	"lookout/warehouse"
	"lookout/warehouse/engines"
	"lookout/warehouse/external"
)

func ptr[T any](v T) *T { return &v }

// engineCase is one real engine the sink ships to.
type engineCase struct {
	name  string
	start func(t *testing.T) *testsrv.Server
	input func(s *testsrv.Server) store.WarehouseInput
}

var engineCases = []engineCase{
	{"postgres", func(t *testing.T) *testsrv.Server { return testsrv.Postgres(t) }, func(s *testsrv.Server) store.WarehouseInput {
		return store.WarehouseInput{Name: ptr("pg"), Type: ptr(store.WarehousePostgres), Config: &store.WarehouseConfig{Host: "127.0.0.1", Port: s.Port, Database: s.Database, SSLMode: "disable"}}
	}},
	{"clickhouse", func(t *testing.T) *testsrv.Server { return testsrv.ClickHouse(t) }, func(s *testsrv.Server) store.WarehouseInput {
		return store.WarehouseInput{Name: ptr("ch"), Type: ptr(store.WarehouseClickHouse), Config: &store.WarehouseConfig{URL: s.URL(), Database: s.Database}}
	}},
}

// testDial is serve's dial: engines.Dial.
var testDial = engines.Dial

type fixture struct {
	st      *store.Store
	records *warehouse.RecordStore
	model   store.Model
	wh      store.Warehouse
	outbox  *warehouse.RecordLog
	mgr     *Manager
	clock   *testclock.Clock
	sent    int
}

func newFixture(t *testing.T, ec engineCase, srv *testsrv.Server) *fixture {
	sealer, err := store.NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "lookout.db"), store.Options{Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, ws, err := st.RegisterOwner(store.NewUser{Email: "o@example.com", Name: "O", PasswordHash: "x"}, "ws", false)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.CreateProject(store.ProjectInput{WorkspaceID: &ws.ID, Name: ptr("p")})
	if err != nil {
		t.Fatal(err)
	}
	cred, err := st.CreateCredential(p.ID, store.CredentialInput{Name: ptr("c"), Type: ptr(store.CredentialPassword), Username: ptr(srv.User), Secret: ptr(srv.Password)})
	if err != nil {
		t.Fatal(err)
	}
	in := ec.input(srv)
	in.CredentialID = &cred.ID
	wh, err := st.CreateWarehouse(p.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.CreateModel(p.ID, store.ModelInput{Key: ptr("orders"), WarehouseID: &wh.ID, Fields: &[]store.Field{
		{Name: "n", Type: store.TypeInteger}, {Name: "note", Type: store.TypeString}}})
	if err != nil {
		t.Fatal(err)
	}
	records, err := warehouse.OpenRecordStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { records.Close() })
	outbox, err := records.Outbox(wh.ID)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, records: records, model: m, wh: wh, outbox: outbox}
	f.clock = testclock.New()
	f.mgr = &Manager{Store: st, Records: records, Dial: testDial, Log: slog.New(slog.DiscardHandler), Now: f.clock.Now,
		Batch: 500, Poll: 5 * time.Millisecond, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.mgr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// shipped starts the engine and a fixture over it, sends n records and waits until the
// sink has shipped them.
func shipped(t *testing.T, ec engineCase, n int) (*testsrv.Server, *fixture) {
	t.Helper()
	srv := ec.start(t)
	f := newFixture(t, ec, srv)
	f.send(t, n)
	if err := f.mgr.Wake(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first records to ship", func() bool { return f.lag(t) == 0 })
	return srv, f
}

// send appends n records as ingest does (one request, one batch, received now by the
// fixture's clock); n of each is distinct.
func (f *fixture) send(t *testing.T, n int) {
	t.Helper()
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = []byte(fmt.Sprintf(`{"n":%d,"note":"it's \\\\ %d \\u0000"}`, f.sent+i, f.sent+i))
	}
	err := f.outbox.Append([]*warehouse.AppendBatch{{ModelID: f.model.ID, ReceivedAt: f.clock.Now(), Records: recs, ClientID: "ic_1", IngestID: "ing_" + strconv.Itoa(f.sent)}})
	if err != nil {
		t.Fatal(err)
	}
	f.sent += n
}

// waitFor polls a condition on the sink (an asynchronous worker) for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling another goroutine's progress, not ordering events
	}
}

func (f *fixture) lag(t *testing.T) int64 {
	st, err := f.outbox.OutboxState(f.model.ID)
	if err != nil {
		t.Fatal(err)
	}
	return st.Lag()
}

// counts asks the engine how many rows and distinct n values the table holds, as queries
// see it.
func (f *fixture) counts(t *testing.T) (rows, distinct int64) {
	eng, err := f.mgr.Engine(f.wh)
	if err != nil {
		t.Fatal(err)
	}
	d := eng.Dialect()
	st := &external.Statement{SQL: "SELECT count(*), " + d.CountDistinct(d.Ident("n")) + " FROM " + d.Table("orders"), Types: []string{store.TypeInteger, store.TypeInteger}}
	res, err := eng.Query(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return res[0][0].(int64), res[0][1].(int64)
}

// TestSinkEngineDownAndBack: the engine stops while records keep coming, then comes back;
// the sink catches up, and the table holds every record once.
func TestSinkEngineDownAndBack(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			srv, f := shipped(t, ec, 1200)

			srv.Stop(t)
			errsBefore := f.mgr.Errors.Load()
			f.send(t, 700)
			f.send(t, 1)
			waitFor(t, "the sink to fail against the stopped engine", func() bool { return f.mgr.Errors.Load() > errsBefore })
			if lag := f.lag(t); lag != 701 {
				t.Fatalf("lag while the engine is down: %d, want 701", lag)
			}
			st := f.mgr.Statuses()
			if len(st) != 1 || st[0].LagRecords != 701 || st[0].LastError == "" {
				t.Fatalf("status while down: %+v", st)
			}
			if bytes.Contains([]byte(st[0].LastError), []byte(srv.Password)) {
				t.Fatalf("the last error shows the password: %s", st[0].LastError)
			}

			srv.Start(t)
			waitFor(t, "the sink to catch up", func() bool { return f.lag(t) == 0 })
			rows, distinct := f.counts(t)
			if rows != int64(f.sent) || distinct != int64(f.sent) {
				t.Fatalf("the table holds %d rows, %d distinct, want %d of each", rows, distinct, f.sent)
			}
		})
	}
}

// TestSinkRedeliveryIsIdempotent: a checkpoint lost after the engine confirmed a batch
// (a crash between the two) sends the batch again; queries still see each record once.
func TestSinkRedeliveryIsIdempotent(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			_, f := shipped(t, ec, 900)
			// Replay the whole outbox into the table, as a restarted sink would after
			// losing its checkpoint.
			eng, err := f.mgr.Engine(f.wh)
			if err != nil {
				t.Fatal(err)
			}
			tbl := external.TableFor(&f.model)
			var rows [][]any
			if _, err := f.outbox.ReadOutbox(f.model.ID, 0, 1<<20, 1<<30, func(r *warehouse.OutboxRecord) error {
				rows = append(rows, tbl.Row(r, nil))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := eng.Insert(context.Background(), tbl, rows); err != nil {
				t.Fatal(err)
			}
			if n, d := f.counts(t); n != 900 || d != 900 {
				t.Fatalf("after a redelivery: %d rows, %d distinct, want 900", n, d)
			}
		})
	}
}

// TestOutboxTrim: the outbox keeps unshipped records whatever their age, and drops
// shipped ones past the retention.
func TestOutboxTrim(t *testing.T) {
	rs, err := warehouse.OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Outbox("wh_1")
	if err != nil {
		t.Fatal(err)
	}
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		recs := [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2}`)}
		if err := l.Append([]*warehouse.AppendBatch{{ModelID: "mdl_1", ReceivedAt: old.Add(time.Duration(i) * time.Hour), Records: recs, ClientID: "c", IngestID: "i" + strconv.Itoa(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetShipped("mdl_1", 4); err != nil {
		t.Fatal(err)
	}
	n, err := l.TrimOutbox("mdl_1", old.Add(100*time.Hour), 100)
	if err != nil || n != 4 {
		t.Fatalf("trimmed %d, %v; want the 4 shipped records", n, err)
	}
	var seqs []uint64
	if _, err := l.ReadOutbox("mdl_1", 0, 100, 1<<30, func(r *warehouse.OutboxRecord) error { seqs = append(seqs, r.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs) != "[5 6]" {
		t.Fatalf("left %v, want [5 6]", seqs)
	}
	if err := l.SetShipped("mdl_1", 3); err != nil { // never moves back
		t.Fatal(err)
	}
	if st, _ := l.OutboxState("mdl_1"); st.Shipped != 4 || st.Head != 6 || st.Lag() != 2 {
		t.Fatalf("state %+v", st)
	}
	if probs := l.Check(); len(probs) > 0 {
		t.Fatalf("check after trimming: %v", probs)
	}
}

// TestSinkFollowsTheWarehouse: a warehouse pointed at another database or schema gets the
// table made there and the records that follow; and while the engine is down, shipped
// records past the local retention are trimmed all the same (a sink that never idles must
// not keep them).
func TestSinkFollowsTheWarehouse(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			srv, f := shipped(t, ec, 300)

			// Another schema (PostgreSQL) or database (ClickHouse), made by the engine's
			// user, then the warehouse moved there.
			eng, err := f.mgr.Engine(f.wh)
			if err != nil {
				t.Fatal(err)
			}
			cfg := f.wh.Config
			if ec.name == "postgres" {
				cfg.Schema = "moved"
				createIn(t, srv, "CREATE SCHEMA moved")
			} else {
				cfg.Database = "moved"
				createIn(t, srv, "CREATE DATABASE moved")
			}
			_ = eng
			wh, err := f.st.UpdateWarehouse(f.wh.ProjectID, f.wh.ID, store.WarehouseInput{Config: &cfg}, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.wh = wh
			f.send(t, 40)
			waitFor(t, "shipping to the moved warehouse", func() bool { return f.lag(t) == 0 })
			if n, d := f.counts(t); n != 40 || d != 40 {
				t.Fatalf("the moved warehouse holds %d rows (%d distinct), want the 40 sent after the move", n, d)
			}

			// Trimming while behind: everything so far is shipped and a day old; the engine
			// stops, more records wait, and a trim pass still drops the old ones.
			srv.Stop(t)
			f.clock.Advance(48 * time.Hour)
			f.send(t, 5)
			waitFor(t, "the old shipped records to be trimmed", func() bool {
				first := uint64(0)
				f.outbox.ReadOutbox(f.model.ID, 0, 1, 1<<30, func(r *warehouse.OutboxRecord) error { first = r.Seq; return errStop })
				return first == 341
			})
			if lag := f.lag(t); lag != 5 {
				t.Fatalf("lag %d, want the 5 unshipped records", lag)
			}
			srv.Start(t)
			waitFor(t, "catching up", func() bool { return f.lag(t) == 0 })
			if probs := f.outbox.Check(); len(probs) > 0 {
				t.Fatalf("check: %v", probs)
			}
		})
	}
}

var errStop = fmt.Errorf("stop")

// createIn runs one statement as the engine's user, outside Lookout.
func createIn(t *testing.T, srv *testsrv.Server, stmt string) {
	t.Helper()
	if srv.Kind == "postgres" {
		u := url.URL{Scheme: "postgres", User: url.UserPassword(srv.User, srv.Password), Host: fmt.Sprintf("127.0.0.1:%d", srv.Port), Path: "/" + srv.Database, RawQuery: "sslmode=disable"}
		conn, err := pgx.Connect(context.Background(), u.String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), stmt); err != nil {
			t.Fatal(err)
		}
		return
	}
	req, _ := http.NewRequest("POST", srv.URL(), strings.NewReader(stmt))
	req.Header.Set("X-ClickHouse-User", srv.User)
	req.Header.Set("X-ClickHouse-Key", srv.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %s", stmt, resp.Status)
	}
}

// TestTableOwnership: two models that share a key (in different projects) pointed at one
// database or schema: the second never writes into the first's table.
func TestTableOwnership(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			srv := ec.start(t)
			w := store.Warehouse{Type: *ec.input(srv).Type, Config: *ec.input(srv).Config}
			eng, err := testDial(w, srv.User, srv.Password)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			a := store.Model{Meta: store.Meta{ID: "mdl_a"}, Key: "events", Fields: []store.Field{{Name: "n", Type: store.TypeInteger}}}
			b := a
			b.ID = "mdl_b"
			ctx := context.Background()
			if err := eng.EnsureTable(ctx, external.TableFor(&a)); err != nil {
				t.Fatal(err)
			}
			if err := eng.EnsureTable(ctx, external.TableFor(&a)); err != nil {
				t.Fatalf("the owner again: %v", err)
			}
			err = eng.EnsureTable(ctx, external.TableFor(&b))
			if err == nil || !strings.Contains(err.Error(), "is not this model's") {
				t.Fatalf("another model's table: %v", err)
			}
		})
	}
}

// TestSinkAddsColumns: a field added to the model becomes a column of its table, and
// records that carry it ship with its values; older rows have it null.
func TestSinkAddsColumns(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			_, f := shipped(t, ec, 10)
			fields := append(f.model.Fields, store.Field{Name: "extra", Type: store.TypeString})
			m, err := f.st.UpdateModel(f.model.ProjectID, f.model.ID, store.ModelInput{Fields: &fields}, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.model = m
			recs := [][]byte{[]byte(`{"n":100,"extra":"x"}`), []byte(`{"n":101,"extra":"y'\"z"}`)}
			if err := f.outbox.Append([]*warehouse.AppendBatch{{ModelID: m.ID, ReceivedAt: f.clock.Now(), Records: recs, ClientID: "ic_1", IngestID: "ing_x"}}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "shipping the new field", func() bool { return f.lag(t) == 0 })
			eng, err := f.mgr.Engine(f.wh)
			if err != nil {
				t.Fatal(err)
			}
			d := eng.Dialect()
			st := &external.Statement{SQL: "SELECT count(*), count(" + d.Ident("extra") + "), max(" + d.Ident("extra") + ") FROM " + d.Table("orders"),
				Types: []string{store.TypeInteger, store.TypeInteger, store.TypeString}}
			res, err := eng.Query(context.Background(), st)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(res[0]) != `[12 2 y'"z]` {
				t.Fatalf("after adding a field: %v", res[0])
			}
		})
	}
}
