package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

type benchAlertsOptions struct {
	runs, connections, batch int
	duration, warmup         time.Duration
	latencyFor               time.Duration
	projects                 int
	skipThroughput           bool
	skipLatency              bool
}

func newBenchAlertsCommand() *cobra.Command {
	o := &benchAlertsOptions{}
	cmd := &cobra.Command{
		Use:   "alerts",
		Short: "Alert evaluation's cost to ingest, and ingest-to-webhook latency, on the real binary",
		Long: "Throughput: runs `bench ingest`'s load (NDJSON batches of ~300-byte records) against fresh\n" +
			"ephemeral servers, alternately with no alert and with 100 enabled alerts on the model (half match\n" +
			"nothing: kind eq a value no record has; half match 1% of records each: a 5-wide band of amount),\n" +
			"and prints the median records/s of each and their ratio.\n" +
			"Latency: 1,000 records/s into several projects, each with an alert and a webhook channel to a\n" +
			"receiver in this process; now and then a record opens a new incident (paced under the delivery\n" +
			"rate limits, so no notice waits for a token), and the receiver times each from the ingest request\n" +
			"to the signed webhook's arrival.",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if !o.skipThroughput {
				if err := benchAlertThroughput(cmd.Context(), o, out, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			if !o.skipLatency {
				return benchAlertLatency(cmd.Context(), o, out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.runs, "runs", 3, "throughput runs of each kind (alternating)")
	f.IntVar(&o.connections, "connections", 4, "concurrent ingest connections (throughput)")
	f.IntVar(&o.batch, "batch", 1000, "records per request (throughput)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "measured time of each throughput run")
	f.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up of each throughput run")
	f.DurationVar(&o.latencyFor, "latency-duration", 60*time.Second, "how long to run the latency load")
	f.IntVar(&o.projects, "projects", 6, "projects (each with one alert and one channel) in the latency run")
	f.BoolVar(&o.skipThroughput, "skip-throughput", false, "run only the latency part")
	f.BoolVar(&o.skipLatency, "skip-latency", false, "run only the throughput part")
	return cmd
}

// createBenchAlerts creates n alerts of the benchmark mix on the events model.
func createBenchAlerts(fx *fixture, pid string, n int) error {
	for i := range n {
		a := map[string]any{"project_id": pid, "name": fmt.Sprint("bench ", i), "model_key": "events",
			"group_by": []string{"country"}, "select_fields": []string{"event_id"}}
		if i%2 == 0 {
			a["conditions"] = []map[string]any{{"field": "kind", "operator": "eq", "value": fmt.Sprint("refund-", i)}}
		} else {
			lo := (i / 2) * 10 % 500
			a["conditions"] = []map[string]any{{"field": "amount", "operator": "gte", "value": lo}, {"field": "amount", "operator": "lt", "value": lo + 5}}
		}
		if _, err := benchCreate(fx, "/alerts", a); err != nil {
			return err
		}
	}
	return nil
}

func benchAlertThroughput(ctx context.Context, o *benchAlertsOptions, out, log io.Writer) error {
	body := benchBody(o.batch)
	rates := map[int][]float64{}
	for run := range o.runs {
		for _, alerts := range []int{0, 100} {
			fx, stop, err := startEphemeral(ctx)
			if err != nil {
				return err
			}
			key, pid, err := setupBenchProject(fx)
			if err == nil {
				err = createBenchAlerts(fx, pid, alerts)
			}
			if err != nil {
				stop()
				return err
			}
			res, err := runLoad(ctx, o.connections, o.warmup, o.duration, func() (*http.Request, error) {
				req, err := http.NewRequest(http.MethodPost, fx.IngestURL+"/ingest?schema=events", bytes.NewReader(body))
				if err == nil {
					req.Header.Set("Authorization", "ApiKey "+key)
					req.Header.Set("Content-Type", "application/x-ndjson")
				}
				return req, err
			})
			var matches float64
			if err == nil {
				matches, _ = metricValue(fx.BaseURL, "lookout_alert_matches_total")
			}
			stop()
			if err != nil {
				return err
			}
			if res.statuses[http.StatusAccepted] == 0 {
				return fmt.Errorf("no request was accepted: %v", res.statuses)
			}
			r := float64(res.statuses[http.StatusAccepted]*o.batch) / res.elapsed.Seconds()
			rates[alerts] = append(rates[alerts], r)
			fmt.Fprintf(log, "run %d, %3d alerts: records/s=%.0f matches=%.0f errors=%d\n", run+1, alerts, r, matches, res.errors)
		}
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	none, some := med(rates[0]), med(rates[100])
	fmt.Fprintf(out, "ingest with 0 alerts: %.0f records/s; with 100 alerts: %.0f records/s; ratio %.2f (median of %d runs each, %d connections, %d records per request)\n",
		none, some, some/none, o.runs, o.connections, o.batch)
	return nil
}

// latencyReceiver times each webhook from the ingest request that carried its record.
type latencyReceiver struct {
	mu   sync.Mutex
	sent map[string]time.Time // event_id -> ingest request start
	lat  []time.Duration
	seen map[string]bool
}

func (l *latencyReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var n struct {
		Latest struct {
			Selected struct {
				EventID string `json:"event_id"`
			} `json:"selected"`
		} `json:"latest_occurrence"`
	}
	_ = json.NewDecoder(r.Body).Decode(&n)
	l.mu.Lock()
	if t, ok := l.sent[n.Latest.Selected.EventID]; ok && !l.seen[n.Latest.Selected.EventID] {
		l.seen[n.Latest.Selected.EventID] = true
		l.lat = append(l.lat, now.Sub(t))
	}
	l.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func benchAlertLatency(ctx context.Context, o *benchAlertsOptions, out io.Writer) error {
	rcv := &latencyReceiver{sent: map[string]time.Time{}, seen: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rcv}
	go srv.Serve(ln)
	defer srv.Close()
	fx, stop, err := startEphemeral(ctx)
	if err != nil {
		return err
	}
	defer stop()
	keys := make([]string, o.projects)
	for k := range keys {
		key, pid, err := setupBenchProject(fx)
		if err != nil {
			return err
		}
		keys[k] = key
		ch, err := benchCreate(fx, "/notification-channels", map[string]any{"project_id": pid, "name": "bench", "type": "webhook",
			"config": map[string]any{"url": fmt.Sprintf("http://%s/p%d", ln.Addr(), k)}})
		if err != nil {
			return err
		}
		if _, err := benchCreate(fx, "/alerts", map[string]any{"project_id": pid, "name": "alarm", "model_key": "events",
			"conditions": []map[string]any{{"field": "kind", "operator": "eq", "value": "alarm"}},
			"group_by":   []string{"session"}, "select_fields": []string{"event_id"}, "channel_ids": []any{ch["id"]}}); err != nil {
			return err
		}
	}
	// 100 requests/s of 10 records, round-robin over the projects. Each project's channel may
	// send one notice per 6 s (10 per minute): a project gets an alarm record every 6.5 s,
	// staggered, so no notice waits for a token and the figure is the pipeline's.
	const perRequest, tick = 10, 10 * time.Millisecond
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var failed sync.Map
	start := time.Now()
	nextAlarm := make([]time.Time, o.projects)
	for k := range nextAlarm {
		nextAlarm[k] = start.Add(time.Second + time.Duration(k)*6500*time.Millisecond/time.Duration(o.projects))
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	alarms, seq := 0, 0
	for i := 0; time.Since(start) < o.latencyFor; i++ {
		<-t.C
		k := i % o.projects
		now := time.Now()
		body := benchBodyFrom(seq, perRequest)
		seq += perRequest
		alarmID := ""
		if !now.Before(nextAlarm[k]) {
			nextAlarm[k] = nextAlarm[k].Add(6500 * time.Millisecond)
			alarmID = fmt.Sprintf("alarm-%06d", alarms)
			alarms++
			body = append(body, fmt.Sprintf(`{"event_id":%q,"session":"s-%s","kind":"alarm","country":"NL","amount":1,"items":1,"logged_in":true,"at":"2026-11-21T12:00:00Z"}`+"\n", alarmID, alarmID)...)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(key, alarmID string, body []byte) {
			defer wg.Done()
			defer func() { <-sem }()
			req, _ := http.NewRequest(http.MethodPost, fx.IngestURL+"/ingest?schema=events", bytes.NewReader(body))
			req.Header.Set("Authorization", "ApiKey "+key)
			req.Header.Set("Content-Type", "application/x-ndjson")
			t0 := time.Now()
			if alarmID != "" {
				rcv.mu.Lock()
				rcv.sent[alarmID] = t0
				rcv.mu.Unlock()
			}
			resp, err := client.Do(req)
			if err != nil {
				failed.Store(alarmID+" "+err.Error(), true)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				failed.Store(fmt.Sprint(alarmID, " ", resp.Status), true)
			}
		}(keys[k], alarmID, body)
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Let the last notices arrive.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		rcv.mu.Lock()
		n := len(rcv.lat)
		rcv.mu.Unlock()
		if n == alarms {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var fails []string
	failed.Range(func(k, _ any) bool { fails = append(fails, k.(string)); return true })
	if len(fails) > 0 {
		return fmt.Errorf("%d ingest requests failed, e.g. %s", len(fails), fails[0])
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.lat) == 0 {
		return errors.New("no webhook arrived")
	}
	slices.Sort(rcv.lat)
	pct := func(p float64) time.Duration { return rcv.lat[int(float64(len(rcv.lat)-1)*p)] }
	fmt.Fprintf(out, "ingest-to-webhook at %.0f records/s over %d projects: notices=%d/%d p50=%s p90=%s p99=%s max=%s\n",
		float64(seq)/elapsed.Seconds(), o.projects, len(rcv.lat), alarms, ms(pct(0.5)), ms(pct(0.9)), ms(pct(0.99)), ms(rcv.lat[len(rcv.lat)-1]))
	return nil
}
