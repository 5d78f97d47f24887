package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// newBenchCommand holds the load commands that drive a real lookout binary over loopback.
// Results belong in docs/performance.md with the command line that produced them.
func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Load-test a running lookout over loopback"}
	cmd.AddCommand(newBenchMgmtCommand(), newBenchStartupCommand(), newBenchIngestCommand(), newBenchQueryCommand(), newBenchAlertsCommand(), newBenchSinkCommand())
	return cmd
}

type benchMgmtOptions struct {
	url, token, project string
	connections         int
	duration, warmup    time.Duration
}

func newBenchMgmtCommand() *cobra.Command {
	o := &benchMgmtOptions{}
	cmd := &cobra.Command{
		Use:   "mgmt",
		Short: "Authenticated GET /management/v1/projects/{id} from N keep-alive connections",
		Long: "Without --url, starts this binary as `serve --ephemeral` in a child process, creates a\n" +
			"project and measures against it, then stops the child.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.url == "" {
				fx, stop, err := startEphemeral(cmd.Context())
				if err != nil {
					return err
				}
				defer stop()
				o.url, o.token = fx.BaseURL, fx.ManagementToken
				if o.project, err = createBenchProject(fx); err != nil {
					return err
				}
			}
			if o.token == "" || o.project == "" {
				return errors.New("--token and --project are required with --url")
			}
			target := o.url + "/management/v1/projects/" + o.project
			fmt.Fprintf(cmd.ErrOrStderr(), "GET %s with %d connections for %s (after %s warm-up)\n", target, o.connections, o.duration, o.warmup)
			res, err := runLoad(cmd.Context(), o.connections, o.warmup, o.duration, func() (*http.Request, error) {
				req, err := http.NewRequest(http.MethodGet, target, nil)
				if err == nil {
					req.Header.Set("Authorization", "Bearer "+o.token)
				}
				return req, err
			})
			if err != nil {
				return err
			}
			res.print(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", "", "base URL of a running lookout (default: start an ephemeral one)")
	f.StringVar(&o.token, "token", "", "Management Token with projects:read")
	f.StringVar(&o.project, "project", "", "project id to read")
	f.IntVar(&o.connections, "connections", 32, "concurrent keep-alive connections")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "measured duration")
	f.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up")
	return cmd
}

func newBenchStartupCommand() *cobra.Command {
	var runs int
	cmd := &cobra.Command{
		Use:   "startup",
		Short: "Time `serve --ephemeral` from exec to its JSON line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ds []time.Duration
			for i := 0; i < runs; i++ {
				start := time.Now()
				_, stop, err := startEphemeral(cmd.Context())
				if err != nil {
					return err
				}
				ds = append(ds, time.Since(start))
				stop()
			}
			slices.Sort(ds)
			fmt.Fprintf(cmd.OutOrStdout(), "runs=%d min=%s p50=%s max=%s\n", runs, ms(ds[0]), ms(ds[len(ds)/2]), ms(ds[len(ds)-1]))
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 10, "number of starts")
	return cmd
}

// startEphemeral runs this binary as `serve --ephemeral` and returns its fixture line.
func startEphemeral(ctx context.Context) (*fixture, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "serve", "--ephemeral", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("ephemeral server printed no fixture line: %w", err)
	}
	var fx fixture
	if err := json.Unmarshal(line, &fx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("fixture line: %w", err)
	}
	go io.Copy(io.Discard, out)
	return &fx, stop, nil
}

func createBenchProject(fx *fixture) (string, error) {
	body, _ := json.Marshal(map[string]string{"workspace_id": fx.WorkspaceID, "name": "bench", "description": "lookout bench mgmt"})
	req, _ := http.NewRequest(http.MethodPost, fx.BaseURL+"/management/v1/projects", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fx.ManagementToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("create project: %s", resp.Status)
	}
	return env.Data.ID, nil
}

type loadResult struct {
	requests, errors int
	elapsed          time.Duration
	lat              []time.Duration
	statuses         map[int]int
}

// runLoad sends requests from n goroutines, each with its own keep-alive connection, for
// warmup (not measured) then d, and collects every latency.
func runLoad(ctx context.Context, n int, warmup, d time.Duration, mk func() (*http.Request, error)) (*loadResult, error) {
	type worker struct {
		lat      []time.Duration
		statuses map[int]int
		errs     int
	}
	ws := make([]*worker, n)
	var wg sync.WaitGroup
	begin := time.Now()
	measureFrom := begin.Add(warmup)
	end := measureFrom.Add(d)
	for i := range ws {
		w := &worker{lat: make([]time.Duration, 0, 1<<16), statuses: map[int]int{}}
		ws[i] = w
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer client.CloseIdleConnections()
			for ctx.Err() == nil {
				req, err := mk()
				if err != nil {
					w.errs++
					return
				}
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					w.errs++
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if t0.After(measureFrom) {
					w.lat = append(w.lat, time.Since(t0))
					w.statuses[resp.StatusCode]++
				}
			}
		}()
	}
	wg.Wait()
	r := &loadResult{elapsed: d, statuses: map[int]int{}}
	for _, w := range ws {
		r.lat = append(r.lat, w.lat...)
		r.errors += w.errs
		for s, c := range w.statuses {
			r.statuses[s] += c
			if s < 200 || s > 299 {
				r.errors += c
			}
		}
	}
	r.requests = len(r.lat)
	if r.requests == 0 {
		return nil, errors.New("no request completed")
	}
	slices.Sort(r.lat)
	return r, nil
}

func (r *loadResult) pct(p float64) time.Duration {
	i := int(float64(len(r.lat)-1) * p)
	return r.lat[i]
}

func (r *loadResult) print(w io.Writer) {
	fmt.Fprintf(w, "requests=%d errors=%d req/s=%.0f p50=%s p90=%s p99=%s max=%s statuses=%v\n",
		r.requests, r.errors, float64(r.requests)/r.elapsed.Seconds(),
		ms(r.pct(0.50)), ms(r.pct(0.90)), ms(r.pct(0.99)), ms(r.lat[len(r.lat)-1]), r.statuses)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
