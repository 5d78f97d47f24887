package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	apphttp "lookout/http"
	"lookout/store"
	"lookout/warehouse"
)

type exportOptions struct {
	project, model, format, from, to, out string
}

func newExportCommand(g *globalOptions) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export --project ID --model KEY [--format ndjson|parquet] [--from T] [--to T] [--out FILE]",
		Short: "Write a model's records as NDJSON or Parquet (online while serve runs, or offline)",
		Long: "Writes every record of a model (sealed blocks and the log, one consistent snapshot) with its\n" +
			"fields and the system fields, as NDJSON or as Parquet (typed columns, zstd, one row group per\n" +
			"block) for DuckDB, Spark or ClickHouse. --from and --to bound record time (RFC 3339, or a\n" +
			"duration before now such as -24h). With --out the file appears only once it is complete.",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.project == "" || o.model == "" {
				return errors.New("--project and --model are required")
			}
			if o.format != warehouse.FormatNDJSON && o.format != warehouse.FormatParquet {
				return fmt.Errorf("--format must be ndjson or parquet")
			}
			d, err := openData(g, true, true)
			if err != nil {
				return err
			}
			defer d.Close()
			// Ctrl-C stops the export between blocks, and the partial file goes.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return writeOut(cmd.OutOrStdout(), o.out, func(w io.Writer) error { return exportTo(ctx, g, d, o, w) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.project, "project", "", "the model's project id")
	f.StringVar(&o.model, "model", "", "the model's key")
	f.StringVar(&o.format, "format", warehouse.FormatNDJSON, "ndjson or parquet")
	f.StringVar(&o.from, "from", "", "first record time (RFC 3339, or a duration before now such as -24h)")
	f.StringVar(&o.to, "to", "", "record time to stop before")
	f.StringVar(&o.out, "out", "", "file to write (default: standard output)")
	return cmd
}

// exportTo writes the export through the running server's admin socket, or straight from
// the files when no server holds them.
func exportTo(ctx context.Context, g *globalOptions, d *dataAccess, o *exportOptions, w io.Writer) error {
	if d.client != nil {
		q := url.Values{"project_id": {o.project}, "model": {o.model}, "format": {o.format}, "from": {o.from}, "to": {o.to}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://lookout/v1/export?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		resp, err := d.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var env struct{ Message string }
			_ = json.NewDecoder(resp.Body).Decode(&env)
			return fmt.Errorf("export: %s: %s", resp.Status, env.Message)
		}
		_, err = io.Copy(w, resp.Body) // a cut stream ends in an error here
		return err
	}
	rng, err := apphttp.ParseExportRange(o.from, o.to, time.Now())
	if err != nil {
		return err
	}
	m, err := d.store.ModelByKey(o.project, o.model)
	if err != nil {
		return err
	}
	wh, err := d.store.Warehouse(o.project, m.WarehouseID)
	if err != nil {
		return err
	}
	if wh.Type != store.WarehouseEmbedded {
		return fmt.Errorf("model %q writes to a %s warehouse: export reads the embedded warehouse only", m.Key, wh.Type)
	}
	log, err := warehouse.OpenReadOnlyLog(g.dataDir, m.WarehouseID)
	if errors.Is(err, os.ErrNotExist) {
		_, err = warehouse.ExportEmpty(&m, o.format, w)
		return err
	}
	if err != nil {
		return err
	}
	defer log.Close()
	_, err = log.Export(ctx, &m, rng, o.format, w)
	return err
}

// writeOut runs write into the named file, created beside it under a temporary name and
// renamed once complete and synced, or into stdout when no file is named.
func writeOut(stdout io.Writer, path string, write func(io.Writer) error) error {
	if path == "" {
		return write(stdout)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename lasts only once the directory is on disk too.
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
