package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

type benchQueryOptions struct {
	records, runs int
	sealWait      time.Duration
}

// benchQueries are the questions bench query times, named like ../shared/bench's pairs.
// The bench records' "at" cycles through one hour, so range_scattered's 36 seconds touch
// every block: the worst case for skipping by time (../shared/bench's range1pct is the
// best, its data being in time order).
var benchQueries = []benchQuery{
	{"group1", `{"schema":"events","group_by":["country"],"aggregations":[{"fn":"count","as":"n"}],"limit":10000}`},
	{"group2", `{"schema":"events","group_by":["country","kind"],"aggregations":[{"fn":"count","as":"n"},{"fn":"avg","field":"items"}],"limit":10000}`},
	{"filter", `{"schema":"events","filters":[{"field":"kind","op":"eq","value":"checkout"}],"aggregations":[{"fn":"count","as":"n"}]}`},
	{"range_scattered", `{"schema":"events","time_range":{"from":"2026-11-21T12:00:00Z","to":"2026-11-21T12:00:36Z"},"aggregations":[{"fn":"count","as":"n"}]}`},
	{"full", `{"schema":"events","aggregations":[{"fn":"count","as":"n"}]}`},
	{"distinct", `{"schema":"events","aggregations":[{"fn":"count_distinct","field":"user_id","as":"users"}]}`},
	{"select", `{"schema":"events","select":["event_id","amount"],"filters":[{"field":"country","op":"eq","value":"NL"}],"order_by":[{"field":"amount","desc":true}],"limit":100}`},
}

func newBenchQueryCommand() *cobra.Command {
	o := &benchQueryOptions{}
	cmd := &cobra.Command{
		Use:   "query",
		Short: "Queries over sealed column blocks in an ephemeral lookout: median ms per query",
		Long: "Starts this binary as `serve --ephemeral`, ingests N records of the 10-field bench model,\n" +
			"waits until the sealer has turned the record log into column blocks, then times each query\n" +
			"(POST /query with a query key) --runs times after one untimed run, and prints the median.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fx, stop, err := startEphemeral(cmd.Context())
			if err != nil {
				return err
			}
			defer stop()
			key, pid, err := setupBenchProject(fx)
			if err != nil {
				return err
			}
			qc, err := benchCreate(fx, "/query-clients", map[string]any{"project_id": pid, "name": "bench", "adhoc_models": []string{"events"}})
			if err != nil {
				return err
			}
			qk, err := benchCreate(fx, "/runtime-api-keys", map[string]any{"project_id": pid, "name": "bench-q", "kind": "query", "client_id": qc["id"]})
			if err != nil {
				return err
			}
			qkey, _ := qk["key"].(string)
			start := time.Now()
			for sent := 0; sent < o.records; sent += 1000 {
				req, _ := http.NewRequest(http.MethodPost, fx.IngestURL+"/ingest?schema=events", bytes.NewReader(benchBodyFrom(sent, min(1000, o.records-sent))))
				req.Header.Set("Authorization", "ApiKey "+key)
				req.Header.Set("Content-Type", "application/x-ndjson")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					return fmt.Errorf("ingest: %s", resp.Status)
				}
			}
			ingestTime := time.Since(start)
			held, _ := metricValue(fx.BaseURL, "lookout_warehouse_seal_write_seconds_total")
			fmt.Fprintf(cmd.ErrOrStderr(), "ingested %d records in %s (sealing held the write lock %.2f s of it); waiting for the sealer\n",
				o.records, ingestTime.Round(time.Millisecond), held)
			deadline := time.Now().Add(o.sealWait)
			for {
				n, err := metricValue(fx.BaseURL, "lookout_warehouse_sealed_records_total")
				if err != nil {
					return err
				}
				if int(n) >= o.records {
					break
				}
				if time.Now().After(deadline) {
					fmt.Fprintf(cmd.ErrOrStderr(), "only %d of %d records sealed after %s; timing anyway\n", int(n), o.records, o.sealWait)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			return timeQueries(cmd, fx.QueryURL, qkey, o.runs, benchQueries)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.records, "records", 200_000, "records to ingest before timing")
	f.IntVar(&o.runs, "runs", 10, "timed runs per query")
	f.DurationVar(&o.sealWait, "seal-wait", 60*time.Second, "longest wait for the sealer to catch up")
	return cmd
}

// metricValue reads one unlabelled series from /metrics.
func metricValue(base, name string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, errors.New(name + " is not in /metrics")
}

// benchQuery is one named query body.
type benchQuery struct{ name, body string }

// timeQueries times each query runs times (after one untimed run) on a query listener and
// prints one line per query with the median.
func timeQueries(cmd *cobra.Command, queryURL, qkey string, runs int, queries []benchQuery) error {
	for _, q := range queries {
		var times []time.Duration
		var answer string
		for run := 0; run <= runs; run++ {
			t0 := time.Now()
			req, _ := http.NewRequestWithContext(cmd.Context(), http.MethodPost, queryURL+"/query", strings.NewReader(q.body))
			req.Header.Set("Authorization", "ApiKey "+qkey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			d := time.Since(t0)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("query %s: %s %s", q.name, resp.Status, b)
			}
			if run > 0 {
				times = append(times, d)
			}
			var env struct {
				Data struct {
					Rows  json.RawMessage `json:"rows"`
					Stats json.RawMessage `json:"stats"`
				} `json:"data"`
			}
			json.Unmarshal(b, &env)
			answer = fmt.Sprintf("rows=%.80s stats=%s", env.Data.Rows, env.Data.Stats)
		}
		slices.Sort(times)
		fmt.Fprintf(cmd.OutOrStdout(), "query=%s median=%s min=%s max=%s runs=%d %s\n", q.name, ms(times[len(times)/2]), ms(times[0]), ms(times[len(times)-1]), len(times), answer)
	}
	return nil
}
