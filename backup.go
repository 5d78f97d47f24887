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
			n, err := writeBackup(d, out)
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

// writeBackup copies the data file into path.tmp, syncs it and renames it over path, so path
// is never a partial copy.
func writeBackup(d *dataAccess, path string) (int64, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp)
	var n int64
	if d.store != nil {
		n, err = d.store.Backup(f, nil)
	} else {
		n, err = streamBackup(d.client, f)
	}
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

func streamBackup(c *http.Client, w io.Writer) (int64, error) {
	resp, err := c.Get("http://lookout/v1/backup")
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
