package alerts

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"lookout/internal/testclock"
	"lookout/store"
)

func ptr[T any](v T) *T { return &v }

// fixture is a real store under t.TempDir() with one project and model "orders", and an
// alerts Service on a fake clock whose dispatcher the test drives pass by pass.
type fixture struct {
	t       testing.TB
	st      *store.Store
	clock   *testclock.Clock
	svc     *Service
	project string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	clock := testclock.New()
	sealer, err := store.NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "lookout.db"), store.Options{Now: clock.Now, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if probs, err := st.Check(); err != nil || len(probs) > 0 {
			t.Errorf("check: %v %v", err, probs)
		}
		st.Close()
	})
	_, ws, err := st.RegisterOwner(store.NewUser{Email: "o@example.com", Name: "O", PasswordHash: "x"}, "ws", false)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.CreateProject(store.ProjectInput{WorkspaceID: &ws.ID, Name: ptr("p")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateModel(p.ID, store.ModelInput{Key: ptr("orders"), Fields: &[]store.Field{
		{Name: "id", Type: "string"}, {Name: "country", Type: "string"}, {Name: "status", Type: "string"},
		{Name: "amount", Type: "number"}, {Name: "note", Type: "string"}}}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, clock: clock, project: p.ID}
	f.svc = New(Config{Store: st, Clock: clock})
	if err := f.svc.disp.recover(); err != nil {
		t.Fatal(err)
	}
	return f
}

// restart is a new Service over the same store, as after a crash: what was in memory is
// gone, the queue is read back from bbolt.
func (f *fixture) restart() {
	f.svc = New(Config{Store: f.st, Clock: f.clock})
	if err := f.svc.disp.recover(); err != nil {
		f.t.Fatal(err)
	}
}

// webhook creates a webhook channel to url and returns its id and signing secret.
func (f *fixture) webhook(url string) (string, string) {
	f.t.Helper()
	cfg, _ := json.Marshal(map[string]any{"url": url, "headers": map[string]string{"X-Token": "tok-0123456789-secret"}})
	c, err := f.svc.CreateChannel(f.project, ChannelInput{Name: ptr("hook"), Type: ptr(ChannelWebhook), Config: cfg})
	if err != nil {
		f.t.Fatal(err)
	}
	return c.ID, c.SigningSecret
}

// alert creates an alert on orders: status eq "failed", grouped by country, selecting id
// and amount, to the channels given.
func (f *fixture) alert(channels ...string) store.Alert {
	f.t.Helper()
	a, err := f.svc.CreateAlert(f.project, store.AlertInput{Name: ptr("failed orders"), ModelKey: ptr("orders"),
		Conditions:   &[]store.AlertCondition{{Field: "status", Operator: "eq", Value: "failed"}},
		GroupBy:      &[]string{"country"},
		SelectFields: &[]string{"id", "amount"}, Severity: ptr("critical"), ChannelIDs: &channels})
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

// ingest hands records to the evaluator as a committed batch received now, and flushes.
func (f *fixture) ingest(records ...string) {
	f.t.Helper()
	recs := make([][]byte, len(records))
	for i, r := range records {
		recs[i] = []byte(r)
	}
	f.svc.Match(Batch{ProjectID: f.project, ModelKey: "orders", ReceivedAt: f.clock.Now(), ClientID: "ic_test", Records: recs})
	f.svc.eval.Flush()
}

// run drives the dispatcher on the fake clock until nothing is due before until.
func (f *fixture) run(until time.Time) {
	for {
		f.svc.disp.Pass()
		f.svc.disp.Wait()
		next, ok := f.svc.disp.NextDue()
		if !ok || next.After(until) {
			return
		}
		if next.After(f.clock.Now()) {
			f.clock.Set(next)
		}
	}
}

func (f *fixture) runFor(d time.Duration) { f.run(f.clock.Now().Add(d)) }

func (f *fixture) incidents(filter store.IncidentFilter) []store.Incident {
	f.t.Helper()
	out, _, err := f.st.ListIncidents(f.project, filter, store.Page{Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) deliveries(filter store.DeliveryFilter) []store.Delivery {
	f.t.Helper()
	out, _, err := f.st.ListDeliveries(f.project, filter, store.Page{Limit: 10000})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// received is one request a receiver got, stamped with the fake clock.
type received struct {
	at     time.Time
	path   string
	header http.Header
	body   []byte
}

// receiver is a real HTTP server that records what it gets; answer decides each reply
// (nil: 204).
type receiver struct {
	mu     sync.Mutex
	clock  *testclock.Clock
	got    []received
	answer func(n int, r *http.Request) (int, http.Header, string)
	srv    *httptest.Server
}

func newReceiver(t *testing.T, clock *testclock.Clock) *receiver {
	rc := &receiver{clock: clock}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{at: clock.Now(), path: r.URL.Path, header: r.Header.Clone(), body: body})
		n, answer := len(rc.got), rc.answer
		rc.mu.Unlock()
		status, h, text := http.StatusNoContent, http.Header{}, ""
		if answer != nil {
			status, h, text = answer(n, r)
		}
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		io.WriteString(w, text)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// verifySignature checks a Standard Webhooks request, written from the scheme's text
// (https://www.standardwebhooks.com) rather than with the package's Sign: the key is the
// base64 after whsec_, the message id.timestamp.body, the signature "v1," + base64 of
// HMAC-SHA256, and the header may carry several space-separated signatures.
func verifySignature(secret string, h http.Header, body []byte) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("webhook-id, webhook-timestamp or webhook-signature missing")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.%s", id, ts, body)
	want := base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, s := range strings.Fields(sigs) {
		if v, sig, ok := strings.Cut(s, ","); ok && v == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("no signature in %q verifies", sigs)
}

// maxInWindow is the most times that fall in any half-open window [t, t+w).
func maxInWindow(times []time.Time, w time.Duration) int {
	ts := append([]time.Time(nil), times...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func decodeNotice(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	return m
}
