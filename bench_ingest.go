package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

type benchIngestOptions struct {
	connections, batch int
	duration, warmup   time.Duration
}

func newBenchIngestCommand() *cobra.Command {
	o := &benchIngestOptions{}
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "NDJSON ingest into an ephemeral lookout: records/s, MB/s and ack latency",
		Long: "Starts this binary as `serve --ephemeral`, creates a 10-field model, an ingest client and a\n" +
			"key, then POSTs NDJSON batches of ~300-byte records from N connections. Every 202 counts only\n" +
			"after the server committed the batch to disk (durable acknowledgement).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fx, stop, err := startEphemeral(cmd.Context())
			if err != nil {
				return err
			}
			defer stop()
			key, err := setupIngestBench(fx)
			if err != nil {
				return err
			}
			body := benchBody(o.batch)
			fmt.Fprintf(cmd.ErrOrStderr(), "POST %s/ingest: %d connections, %d records (%d bytes) per request, %s after %s warm-up\n",
				fx.IngestURL, o.connections, o.batch, len(body), o.duration, o.warmup)
			res, err := runLoad(cmd.Context(), o.connections, o.warmup, o.duration, func() (*http.Request, error) {
				req, err := http.NewRequest(http.MethodPost, fx.IngestURL+"/ingest?schema=events", bytes.NewReader(body))
				if err == nil {
					req.Header.Set("Authorization", "ApiKey "+key)
					req.Header.Set("Content-Type", "application/x-ndjson")
				}
				return req, err
			})
			if err != nil {
				return err
			}
			if res.statuses[http.StatusAccepted] == 0 {
				return fmt.Errorf("no request was accepted: %v", res.statuses)
			}
			recs := float64(res.statuses[http.StatusAccepted]*o.batch) / res.elapsed.Seconds()
			fmt.Fprintf(cmd.OutOrStdout(), "records/s=%.0f MB/s=%.1f requests=%d errors=%d ack p50=%s p90=%s p99=%s max=%s statuses=%v\n",
				recs, recs*float64(len(body))/float64(o.batch)/1e6, res.requests, res.errors,
				ms(res.pct(0.5)), ms(res.pct(0.9)), ms(res.pct(0.99)), ms(res.lat[len(res.lat)-1]), res.statuses)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.connections, "connections", 8, "concurrent keep-alive connections")
	f.IntVar(&o.batch, "batch", 1000, "records per request")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "measured duration")
	f.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up")
	return cmd
}

// benchFields is the 10-field model the ingest benchmark writes.
var benchFields = []map[string]any{
	{"name": "event_id", "type": "string", "required": true}, {"name": "user_id", "type": "string"},
	{"name": "session", "type": "string"}, {"name": "kind", "type": "string"}, {"name": "country", "type": "string"},
	{"name": "path", "type": "string"}, {"name": "amount", "type": "number"}, {"name": "items", "type": "integer"},
	{"name": "logged_in", "type": "boolean"}, {"name": "at", "type": "timestamp"},
}

// benchBody is n NDJSON records of about 300 bytes each.
func benchBody(n int) []byte { return benchBodyFrom(0, n) }

// benchBodyFrom is records from to from+n of the same sequence.
func benchBodyFrom(from, n int) []byte {
	var b bytes.Buffer
	kinds := []string{"page_view", "add_to_cart", "checkout", "search"}
	countries := []string{"NL", "DE", "FR", "US", "GB", "JP"}
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, `{"event_id":"evt-%08d-%s","user_id":"user-%06d","session":"sess-%012d","kind":"%s","country":"%s","path":"/shop/category/%03d/product/%05d?ref=newsletter&utm=autumn-sale","amount":%d.%02d,"items":%d,"logged_in":%t,"at":"2026-11-21T12:%02d:%02d.%03dZ"}`+"\n",
			i, strings.Repeat("x", 20), i%5000, i*7919, kinds[i%len(kinds)], countries[i%len(countries)], i%200, i%10000,
			i%500, i%100, i%9, i%2 == 0, i%60, (i/60)%60, i%1000)
	}
	return b.Bytes()
}

func setupIngestBench(fx *fixture) (string, error) {
	key, _, err := setupBenchProject(fx)
	return key, err
}

// benchCreate POSTs a Management API create and returns the created resource.
func benchCreate(fx *fixture, path string, body any) (map[string]any, error) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, fx.BaseURL+"/management/v1"+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+fx.ManagementToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Data map[string]any `json:"data"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &env) != nil {
		return nil, fmt.Errorf("POST %s: %s %s", path, resp.Status, b)
	}
	return env.Data, nil
}

// setupBenchProject makes a project with the 10-field events model, an ingest client and
// its key; it returns the key and the project id.
func setupBenchProject(fx *fixture) (string, string, error) {
	do := func(path string, body any) (map[string]any, error) { return benchCreate(fx, path, body) }
	p, err := do("/projects", map[string]any{"workspace_id": fx.WorkspaceID, "name": "bench"})
	if err != nil {
		return "", "", err
	}
	pid := p["id"].(string)
	if _, err := do("/models", map[string]any{"project_id": pid, "key": "events", "fields": benchFields, "timestamp_field": "at"}); err != nil {
		return "", "", err
	}
	c, err := do("/ingest-clients", map[string]any{"project_id": pid, "name": "bench", "models": []string{"events"}})
	if err != nil {
		return "", "", err
	}
	k, err := do("/runtime-api-keys", map[string]any{"project_id": pid, "name": "bench", "kind": "ingest", "client_id": c["id"]})
	if err != nil {
		return "", "", err
	}
	key, _ := k["key"].(string)
	if key == "" {
		return "", "", errors.New("no key")
	}
	return key, pid, nil
}
