package http

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"lookout/ingest"
	"lookout/warehouse"
)

// orderLine is NDJSON line n of a test stream: valid unless bad.
func orderLine(n int, bad bool) string {
	if bad {
		return fmt.Sprintf(`{"amount":%d}`, n) + "\n" // no id: rejected
	}
	return fmt.Sprintf(`{"id":"o-%d","amount":%d}`, n, n) + "\n"
}

// storedIDs lists, in log order, the ids of the records one ingest request stored.
func (rw *runtimeWorld) storedIDs(ingestID string) []string {
	rw.t.Helper()
	m, err := rw.st.ModelByKey(rw.project, "orders")
	if err != nil {
		rw.t.Fatal(err)
	}
	log, err := rw.records.Log(m.WarehouseID)
	if err != nil {
		rw.t.Fatal(err)
	}
	var ids []string
	mark := []byte(`"_ingest_id":"` + ingestID + `"`)
	err = log.Scan(m.ID, time.Time{}, time.Time{}, func(_, rec []byte) error {
		if bytes.Contains(rec, mark) {
			var r struct{ ID string }
			if err := json.Unmarshal(rec, &r); err != nil {
				return err
			}
			ids = append(ids, r.ID)
		}
		return nil
	})
	if err != nil {
		rw.t.Fatal(err)
	}
	return ids
}

func gz(t *testing.T, s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := io.WriteString(zw, s); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return b.String()
}

// partialBody is the envelope of a request that failed after storing part of its records.
type partialBody struct {
	Error       bool   `json:"error"`
	Code        string `json:"code"`
	Message     string `json:"message"`
	IngestID    string `json:"ingest_id"`
	Accepted    *int   `json:"accepted"`
	ResumeLine  *int   `json:"resume_line"`
	ResumeIndex *int   `json:"resume_index"`
}

// TestStreamFailureSaysWhatWasStored: a streamed request that fails midway answers the
// error with how many records are stored and where to resume, and what is stored is
// exactly the valid records before that point, in order.
func TestStreamFailureSaysWhatWasStored(t *testing.T) {
	rw := newRuntimeWorld(t)
	lines := func(n int, badEvery int) (string, []string) {
		var b strings.Builder
		var valid []string
		for i := 1; i <= n; i++ {
			bad := badEvery > 0 && i%badEvery == 0
			b.WriteString(orderLine(i, bad))
			if !bad {
				valid = append(valid, fmt.Sprintf("o-%d", i))
			}
		}
		return b.String(), valid
	}
	body2500, _ := lines(2500, 0)
	mixed, _ := lines(2500, 7)
	full := gz(t, body2500)
	var jsonRecs []string
	for i := 1; i <= 2500; i++ {
		jsonRecs = append(jsonRecs, strings.TrimSpace(orderLine(i, false)))
	}
	for _, tc := range []struct {
		name     string
		body     string
		header   map[string]string
		maxBody  int64
		status   int
		code     string
		contains string
		byIndex  bool
	}{
		{name: "truncated gzip", body: full[:len(full)*9/10], header: map[string]string{"Content-Encoding": "gzip"}, status: 400, code: "invalid_json", contains: "gzip stream is corrupt or truncated"},
		{name: "body over --ingest-max-body", body: body2500, maxBody: int64(len(body2500)) * 96 / 100, status: 413, code: "too_large", contains: "--ingest-max-body"},
		{name: "over the cap with rejected lines", body: mixed, maxBody: int64(len(mixed)) * 96 / 100, status: 413, code: "too_large"},
		{name: "JSON body broken after 2,500 records", body: `{"schema":"orders","data":[` + strings.Join(jsonRecs, ",") + `,]}`, header: map[string]string{"Content-Type": "application/json"}, status: 400, code: "invalid_json", contains: "invalid JSON at byte", byIndex: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw.ingest.SetLimits(ingest.Limits{MaxBody: tc.maxBody})
			defer rw.ingest.SetLimits(ingest.Limits{})
			h := map[string]string{"Authorization": "ApiKey " + rw.keys["keys"]}
			for k, v := range tc.header {
				h[k] = v
			}
			r := rw.runtime(ingestReq{body: tc.body, header: h})
			var pb partialBody
			if err := json.Unmarshal([]byte(r.body), &pb); err != nil || r.status != tc.status || pb.Code != tc.code || !strings.Contains(pb.Message, tc.contains) {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if pb.Accepted == nil || *pb.Accepted < 1000 || pb.IngestID == "" {
				t.Fatalf("no count of what was stored: %s", r.body)
			}
			stored := rw.storedIDs(pb.IngestID)
			if len(stored) != *pb.Accepted {
				t.Fatalf("accepted %d, stored %d", *pb.Accepted, len(stored))
			}
			last := 0
			for i, id := range stored {
				var n int
				fmt.Sscanf(id, "o-%d", &n)
				if n <= last {
					t.Fatalf("record %d (%s) stored after o-%d: out of order", i, id, last)
				}
				if tc.name != "over the cap with rejected lines" && n != i+1 {
					t.Fatalf("stored record %d is %s: not the valid lines in order", i, id)
				}
				last = n
			}
			resume := pb.ResumeLine
			if tc.byIndex {
				resume = pb.ResumeIndex
				last-- // indexes are 0-based
			}
			if resume == nil || *resume != last+1 {
				t.Fatalf("resume at %v, last stored %d: %s", resume, last, r.body)
			}
		})
	}
}

// failingReader yields its data, then fails as a dropped connection does.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// TestDisconnectKeepsAPrefix: a client that goes away midway leaves exactly a prefix of
// its valid records stored, and the service says which.
func TestDisconnectKeepsAPrefix(t *testing.T) {
	rw := newRuntimeWorld(t)
	var b strings.Builder
	for i := 1; i <= 2400; i++ {
		b.WriteString(orderLine(i, false))
	}
	c := ingest.Caller{ProjectID: rw.project, ClientID: rw.clients["keys"], Models: []string{"orders"}}
	_, err := rw.ingest.Ingest(context.Background(), c, ingest.Request{ContentType: "application/x-ndjson", Schema: "orders",
		Body: &failingReader{r: strings.NewReader(b.String()), err: io.ErrUnexpectedEOF}})
	var p *ingest.Partial
	if !asPartial(err, &p) || p.Accepted != 2000 || p.ResumeLine == nil || *p.ResumeLine != 2001 {
		t.Fatalf("err %v (%+v)", err, p)
	}
	if got := rw.storedIDs(p.IngestID); len(got) != 2000 || got[0] != "o-1" || got[1999] != "o-2000" {
		t.Fatalf("stored %d records", len(got))
	}
}

func asPartial(err error, p **ingest.Partial) bool {
	pp, ok := err.(*ingest.Partial)
	*p = pp
	return ok
}

// TestDecompressionBombs: gzip bodies that inflate far beyond their size, and JSON bodies
// of whitespace, end as 413 after reading no more than the caps.
func TestDecompressionBombs(t *testing.T) {
	rw := newRuntimeWorld(t)
	key := "ApiKey " + rw.keys["keys"]
	spaces := strings.Repeat(" ", 8<<20)
	for _, tc := range []struct {
		name, ct, body string
		lim            ingest.Limits
		contains       string
	}{
		{"ndjson whitespace bomb", "application/x-ndjson", orderLine(1, false) + spaces + orderLine(2, false), ingest.Limits{}, "--ingest-max-ratio"},
		{"json whitespace bomb", "application/json", `{"schema":"orders","data":[` + spaces + `]}`, ingest.Limits{}, "--ingest-max-ratio"},
		{"json whitespace past 64 MiB", "application/json", `{"schema":"orders","data":[` + strings.Repeat(" ", ingest.MaxJSONBody) + `]}`, ingest.Limits{MaxRatio: 1 << 40}, "whitespace included"},
		{"ndjson past --ingest-max-body", "application/x-ndjson", orderLine(1, false) + spaces, ingest.Limits{MaxBody: 4 << 20, MaxRatio: 1 << 40}, "--ingest-max-body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw.ingest.SetLimits(tc.lim)
			defer rw.ingest.SetLimits(ingest.Limits{})
			r := rw.runtime(ingestReq{body: gz(t, tc.body), header: map[string]string{"Authorization": key, "Content-Type": tc.ct, "Content-Encoding": "gzip"}})
			if r.status != 413 || r.env.Code != "too_large" || !strings.Contains(r.env.Message, tc.contains) {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
}

// TestIdempotencyKeyInFlight: a second request with the key of one still being read is
// refused at once with 409, and the first completes.
func TestIdempotencyKeyInFlight(t *testing.T) {
	rw := newRuntimeWorld(t)
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	c := ingest.Caller{ProjectID: rw.project, ClientID: rw.clients["keys"], Models: []string{"orders", "clicks"}}
	type answer struct {
		res *ingest.Result
		err error
	}
	first := make(chan answer, 1)
	go func() {
		res, err := rw.ingest.Ingest(context.Background(), c, ingest.Request{ContentType: "application/x-ndjson", Schema: "orders", IdempotencyKey: "slow-one", Body: pr})
		first <- answer{res, err}
	}()
	// The service reads the body only once it holds the key: when this write returns, the
	// first request is in flight.
	if _, err := io.WriteString(pw, orderLine(1, false)); err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"Authorization": "ApiKey " + rw.keys["keys"], "Idempotency-Key": "slow-one"}
	if r := rw.runtime(ingestReq{body: orderLine(1, false), header: h}); r.status != 409 || !strings.Contains(r.env.Message, "still being processed") {
		t.Fatalf("second request: %d %s", r.status, r.body)
	}
	pw.Close()
	if a := <-first; a.err != nil || a.res.Accepted != 1 {
		t.Fatalf("first request: %+v %v", a.res, a.err)
	}
	if r := rw.runtime(ingestReq{body: orderLine(1, false), header: h}); r.status != 202 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat after the first: %d %s", r.status, r.body)
	}
}

// TestIdempotentMemoryBudget: Idempotency-Key requests buffer their records until one
// commit; past the process-wide budget they are told to come back (503), and what they
// held is given back.
func TestIdempotentMemoryBudget(t *testing.T) {
	rw := newRuntimeWorld(t)
	rw.ingest.SetLimits(ingest.Limits{IdempotentMemory: 2 << 20})
	var b strings.Builder
	for i := 1; b.Len() < 3<<20; i++ {
		b.WriteString(orderLine(i, false))
	}
	h := map[string]string{"Authorization": "ApiKey " + rw.keys["keys"], "Idempotency-Key": "big"}
	r := rw.runtime(ingestReq{body: b.String(), header: h})
	if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.env.Message, "Idempotency-Key") {
		t.Fatalf("over the budget: %d %s", r.status, r.body)
	}
	for i := 0; i < 3; i++ { // nothing leaked: small keyed requests still fit, again and again
		h["Idempotency-Key"] = fmt.Sprintf("small-%d", i)
		if r := rw.runtime(ingestReq{body: orderLine(1, false), header: h}); r.status != 202 {
			t.Fatalf("small keyed request: %d %s", r.status, r.body)
		}
	}
	delete(h, "Idempotency-Key")
	if r := rw.runtime(ingestReq{body: b.String(), header: h}); r.status != 202 {
		t.Fatalf("the same body streamed: %d %s", r.status, r.body)
	}
}

// TestSystemFieldsDoNotCollide: a model may have a field called ingest_id; the system
// fields start with _ and model fields may not.
func TestSystemFieldsDoNotCollide(t *testing.T) {
	rw := newRuntimeWorld(t)
	mg := "/management/v1"
	r := rw.do("POST", mg+"/models", rw.all, map[string]any{"project_id": rw.project, "key": "bad", "fields": []map[string]any{{"name": "_received_at", "type": "string"}}})
	if r.status != 400 || !strings.Contains(r.body, "fields[0].name") || !strings.Contains(r.body, "reserved for the system fields") {
		t.Fatalf("underscore field: %d %s", r.status, r.body)
	}
	rw.created(rw.all, mg+"/models", map[string]any{"project_id": rw.project, "key": "jobs", "fields": []map[string]any{{"name": "ingest_id", "type": "string"}}})
	cl := rw.created(rw.all, mg+"/ingest-clients", map[string]any{"project_id": rw.project, "name": "jobs", "models": []string{"jobs"}})
	k := rw.newKey(cl, "ingest", nil)
	if r := rw.runtime(ingestReq{path: "/ingest?schema=jobs", body: `{"ingest_id":"mine"}` + "\n", header: map[string]string{"Authorization": "ApiKey " + k}}); r.status != 202 {
		t.Fatalf("ingest: %d %s", r.status, r.body)
	}
	m, _ := rw.st.ModelByKey(rw.project, "jobs")
	log, _ := rw.records.Log(m.WarehouseID)
	var recs []string
	log.Scan(m.ID, time.Time{}, time.Time{}, func(_, rec []byte) error { recs = append(recs, string(rec)); return nil })
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(recs[0]), &fields); err != nil || fields["ingest_id"] != "mine" || !strings.HasPrefix(fmt.Sprint(fields["_ingest_id"]), "ing_") || strings.Count(recs[0], `"ingest_id"`) != 1 {
		t.Fatalf("stored %s", recs[0])
	}
	_ = warehouse.WarehouseVersion
}
