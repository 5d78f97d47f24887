package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"lookout/store"
)

func newBackupCommand(g *globalOptions) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Write a consistent copy of the data file (online while serve runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			d, err := openData(g, true)
			if err != nil {
				return err
			}
			defer d.Close()
			n, err := writeBackup(d, g, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d bytes)\n", out, n)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write (replaced atomically)")
	return cmd
}

// writeBackup copies the control-plane file to path and each embedded warehouse file to
// path.warehouses/<id>.db. Every copy goes to a .tmp file that is fsynced and renamed, so
// no path ever holds a partial copy.
func writeBackup(d *dataAccess, g *globalOptions, path string) (int64, error) {
	n, err := atomicWrite(path, func(w io.Writer) (int64, error) {
		if d.store != nil {
			return d.store.Backup(w, nil)
		}
		return streamBackup(d.client, "/v1/backup", w)
	})
	if err != nil {
		return 0, err
	}
	ids, err := warehouseFiles(d, g)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return n, nil
	}
	dir := path + ".warehouses"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	var records *store.RecordStore
	if d.store != nil {
		if records, err = store.OpenRecordStore(g.dataDir); err != nil {
			return 0, err
		}
		defer records.Close()
	}
	for _, id := range ids {
		m, err := atomicWrite(filepath.Join(dir, id+".db"), func(w io.Writer) (int64, error) {
			if records == nil {
				return streamBackup(d.client, "/v1/backup/warehouses/"+id, w)
			}
			l, err := records.Log(id)
			if err != nil {
				return 0, err
			}
			return l.Backup(w, nil)
		})
		if err != nil {
			return 0, fmt.Errorf("warehouse %s: %w", id, err)
		}
		n += m
	}
	return n, nil
}

// warehouseFiles lists the embedded warehouse files, directly or through the socket.
func warehouseFiles(d *dataAccess, g *globalOptions) ([]string, error) {
	if d.store == nil {
		var ids []string
		err := d.call("GET", "/v1/warehouses", nil, &ids)
		return ids, err
	}
	rs, err := store.OpenRecordStore(g.dataDir)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	return rs.Files()
}

func atomicWrite(path string, write func(io.Writer) (int64, error)) (int64, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp)
	n, err := write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, err
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		dir.Sync()
		dir.Close()
	}
	return n, nil
}

func streamBackup(c *http.Client, path string, w io.Writer) (int64, error) {
	resp, err := c.Get("http://lookout" + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("server answered %s", resp.Status)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, err
	}
	if want, _ := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); want != n {
		return n, fmt.Errorf("copy cut short: %d of %d bytes", n, want)
	}
	return n, nil
}
