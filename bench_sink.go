package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

type benchSinkOptions struct {
	typ, config, user, data string
	records, runs           int
	wait                    time.Duration
}

// sharedBenchFields and sharedBenchQueries are ../shared/bench's model and queries (its
// README: setup-lookout and "queries"), for --data: the same records and the same five
// questions it asks Lookout and VictoriaLogs.
var sharedBenchFields = []map[string]any{
	{"name": "ts", "type": "timestamp", "required": true}, {"name": "event", "type": "string", "required": true},
	{"name": "user_id", "type": "string", "required": true}, {"name": "session_id", "type": "string", "required": true},
	{"name": "country", "type": "string", "required": true}, {"name": "device", "type": "string", "required": true},
	{"name": "url", "type": "string", "required": true}, {"name": "duration_ms", "type": "integer", "required": true},
	{"name": "amount", "type": "number", "required": true}, {"name": "success", "type": "boolean", "required": true},
}

var sharedBenchQueries = []benchQuery{
	{"group1", `{"schema":"events","group_by":["country"],"aggregations":[{"fn":"count","as":"n"}],"limit":10000}`},
	{"group2", `{"schema":"events","group_by":["country","device"],"aggregations":[{"fn":"count","as":"n"},{"fn":"avg","field":"duration_ms"}],"limit":10000}`},
	{"filter", `{"schema":"events","filters":[{"field":"event","op":"eq","value":"purchase"}],"aggregations":[{"fn":"count","as":"n"}]}`},
	{"range1pct", `{"schema":"events","time_range":{"from":"2026-11-20T00:00:00Z","to":"2026-11-20T00:14:24Z"},"aggregations":[{"fn":"count","as":"n"}]}`},
	{"full", `{"schema":"events","aggregations":[{"fn":"count","as":"n"}]}`},
}

func newBenchSinkCommand() *cobra.Command {
	o := &benchSinkOptions{}
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Records/s shipped to an external warehouse (ClickHouse or PostgreSQL), then query latency through it",
		Long: "Starts this binary as `serve --ephemeral`, creates a warehouse of --type with --config (JSON)\n" +
			"and --user (the password from $LOOKOUT_BENCH_WAREHOUSE_PASSWORD), a model \"events\" on it,\n" +
			"ingests --records bench records in 1,000-record NDJSON requests, and times how long until the\n" +
			"sink has shipped them all (records/s from the first request to the last record confirmed by\n" +
			"the engine). Then it times the bench queries (those of `bench query`, named like\n" +
			"../shared/bench's) through the engine. The engine's table \"events\" must be empty or absent.",
		Example: "  LOOKOUT_BENCH_WAREHOUSE_PASSWORD=… lookout bench sink --type clickhouse --config '{\"url\":\"http://127.0.0.1:8123\",\"database\":\"bench\"}' --user lookout\n" +
			"  LOOKOUT_BENCH_WAREHOUSE_PASSWORD=… lookout bench sink --type postgres --config '{\"host\":\"127.0.0.1\",\"port\":5432,\"database\":\"bench\",\"sslmode\":\"disable\"}' --user lookout",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var config map[string]any
			if err := json.Unmarshal([]byte(o.config), &config); err != nil {
				return fmt.Errorf("--config must be a JSON object: %w", err)
			}
			fx, stop, err := startEphemeral(cmd.Context())
			if err != nil {
				return err
			}
			defer stop()
			do := func(path string, body any) (map[string]any, error) { return benchCreate(fx, path, body) }
			p, err := do("/projects", map[string]any{"workspace_id": fx.WorkspaceID, "name": "bench-sink"})
			if err != nil {
				return err
			}
			pid := p["id"].(string)
			wh := map[string]any{"project_id": pid, "name": o.typ, "type": o.typ, "config": config}
			if o.user != "" {
				c, err := do("/warehouse-credentials", map[string]any{"project_id": pid, "name": "bench", "type": "password", "username": o.user, "secret": os.Getenv("LOOKOUT_BENCH_WAREHOUSE_PASSWORD")})
				if err != nil {
					return err
				}
				wh["credential_id"] = c["id"]
			}
			w, err := do("/warehouses", wh)
			if err != nil {
				return err
			}
			fields, tsField, queries := benchFields, "at", benchQueries
			var chunks [][]byte
			if o.data != "" {
				fields, tsField, queries = sharedBenchFields, "ts", sharedBenchQueries
				if chunks, err = ndjsonChunks(o.data, 1000); err != nil {
					return err
				}
				o.records = 0
				for _, c := range chunks {
					o.records += bytes.Count(c, []byte("\n"))
				}
			} else {
				for sent := 0; sent < o.records; sent += 1000 {
					chunks = append(chunks, benchBodyFrom(sent, min(1000, o.records-sent)))
				}
			}
			if _, err := do("/models", map[string]any{"project_id": pid, "key": "events", "fields": fields, "timestamp_field": tsField, "warehouse_id": w["id"]}); err != nil {
				return err
			}
			ic, err := do("/ingest-clients", map[string]any{"project_id": pid, "name": "bench", "models": []string{"events"}})
			if err != nil {
				return err
			}
			k, err := do("/runtime-api-keys", map[string]any{"project_id": pid, "name": "bench", "kind": "ingest", "client_id": ic["id"]})
			if err != nil {
				return err
			}
			qc, err := do("/query-clients", map[string]any{"project_id": pid, "name": "bench", "adhoc_models": []string{"events"}})
			if err != nil {
				return err
			}
			qk, err := do("/runtime-api-keys", map[string]any{"project_id": pid, "name": "bench-q", "kind": "query", "client_id": qc["id"]})
			if err != nil {
				return err
			}
			key, qkey := k["key"].(string), qk["key"].(string)
			start := time.Now()
			for _, chunk := range chunks {
				req, _ := http.NewRequestWithContext(cmd.Context(), http.MethodPost, fx.IngestURL+"/ingest?schema=events", bytes.NewReader(chunk))
				req.Header.Set("Authorization", "ApiKey "+key)
				req.Header.Set("Content-Type", "application/x-ndjson")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					return fmt.Errorf("ingest: %s %s", resp.Status, b)
				}
			}
			ingested := time.Since(start)
			deadline := time.Now().Add(o.wait)
			for {
				shipped, err := sinkShipped(fx.BaseURL)
				if err != nil {
					return err
				}
				if shipped >= o.records {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("only %d of %d records shipped after %s", shipped, o.records, o.wait)
				}
				time.Sleep(20 * time.Millisecond) // polling the server's sink
			}
			all := time.Since(start)
			fmt.Fprintf(cmd.OutOrStdout(), "engine=%s records=%d ingest_ack_s=%.2f shipped_all_s=%.2f shipped_records_per_s=%.0f\n",
				o.typ, o.records, ingested.Seconds(), all.Seconds(), float64(o.records)/all.Seconds())
			return timeQueries(cmd, fx.QueryURL, qkey, o.runs, queries)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.typ, "type", "clickhouse", "warehouse type: clickhouse or postgres")
	f.StringVar(&o.config, "config", `{"url":"http://127.0.0.1:8123","database":"default"}`, "the warehouse's config, as in POST /warehouses")
	f.StringVar(&o.user, "user", "", "the engine's user (password from $LOOKOUT_BENCH_WAREHOUSE_PASSWORD); empty: no credential")
	f.IntVar(&o.records, "records", 200_000, "records to ingest and ship (the bench model's records)")
	f.StringVar(&o.data, "data", "", "ship this NDJSON file instead, with ../shared/bench's model, and time its five queries (group1, group2, filter, range1pct, full)")
	f.IntVar(&o.runs, "runs", 10, "timed runs per query")
	f.DurationVar(&o.wait, "wait", 5*time.Minute, "longest wait for the sink to ship everything")
	return cmd
}

// sinkShipped sums lookout_sink_shipped_records_total over its series.
func sinkShipped(base string) (int, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	total, seen := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "lookout_sink_shipped_records_total{") {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			return 0, err
		}
		total, seen = total+v, true
	}
	if !seen && sc.Err() == nil {
		return 0, nil
	}
	return int(total), errors.Join(sc.Err())
}

// ndjsonChunks reads an NDJSON file into request bodies of n lines each.
func ndjsonChunks(path string, n int) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]byte
	var cur bytes.Buffer
	lines := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 10<<20)
	for sc.Scan() {
		cur.Write(sc.Bytes())
		cur.WriteByte('\n')
		if lines++; lines == n {
			out = append(out, bytes.Clone(cur.Bytes()))
			cur.Reset()
			lines = 0
		}
	}
	if lines > 0 {
		out = append(out, bytes.Clone(cur.Bytes()))
	}
	return out, sc.Err()
}
