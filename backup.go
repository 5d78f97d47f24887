package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"lookout/warehouse"
)

func newBackupCommand(g *globalOptions) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "backup --out DIR",
		Short: "Write a consistent copy of the data files into a new directory (online while serve runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			d, err := openData(g, true, true)
			if err != nil {
				return err
			}
			defer d.Close()
			target, err := backupTarget(g.dataDir, out)
			if err != nil {
				return err
			}
			files, err := writeBackup(d, target)
			if err != nil {
				return err
			}
			var total int64
			for _, f := range files {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%d bytes\n", f.name, f.size)
				total += f.size
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d files, %d bytes\n", target, len(files), total)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to create for the backup (must not exist, and must be outside the data dir)")
	return cmd
}

// backupTarget resolves --out to the absolute path the backup directory will have, with
// symbolic links of its parent resolved, and refuses a path that exists or lies inside the
// data dir: a backup written over lookout.db would replace the live file under a running
// server (which goes on writing the unlinked inode, losing every later write).
func backupTarget(dataDir, out string) (string, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", fmt.Errorf("--out %s: its directory does not exist: %w", out, err)
	}
	target := filepath.Join(parent, filepath.Base(abs))
	if _, err := os.Lstat(target); err == nil {
		return "", fmt.Errorf("--out %s already exists: a backup never replaces anything; name a new directory", out)
	}
	data, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(data); err == nil {
		data = resolved
	}
	if target == data || strings.HasPrefix(target, data+string(filepath.Separator)) {
		return "", fmt.Errorf("--out %s is inside the data dir %s: write backups elsewhere", out, dataDir)
	}
	return target, nil
}

// backupFile is one file of a backup set, by its path inside the backup directory.
type backupFile struct {
	name string
	size int64
	sum  [sha256.Size]byte
}

// writeBackup writes the backup set into a new directory target, laid out like a data dir:
// lookout.db, warehouses/<id>.db, and SHA256SUMS (`sha256sum -c` format). Everything is
// written into a temporary directory beside target, fsynced (files and directories), and
// renamed to target only when the whole set is complete: a backup killed halfway leaves
// no target at all (only a "<target>.partial-*" directory to delete), never a mismatched
// set.
func writeBackup(d *dataAccess, target string) ([]backupFile, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(target), filepath.Base(target)+".partial-")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	var files []backupFile
	add := func(name string, copy func(io.Writer) (int64, error)) error {
		f, err := writeSynced(filepath.Join(tmp, name), copy)
		if err != nil {
			return fmt.Errorf("backup %s: %w", name, err)
		}
		f.name = name
		files = append(files, f)
		return nil
	}
	if err := add("lookout.db", func(w io.Writer) (int64, error) {
		if d.store != nil {
			return d.store.Backup(w, nil)
		}
		return streamBackup(d.client, "/v1/backup", w)
	}); err != nil {
		return nil, err
	}
	ids, err := warehouseFiles(d)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		if err := os.Mkdir(filepath.Join(tmp, "warehouses"), 0o700); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		err := add(filepath.Join("warehouses", id+".db"), func(w io.Writer) (int64, error) {
			if d.store == nil {
				return streamBackup(d.client, "/v1/backup/warehouses/"+id, w)
			}
			l, err := warehouse.OpenReadOnlyLog(d.dataDir, id)
			if err != nil {
				return 0, err
			}
			defer l.Close()
			return l.Backup(w, nil)
		})
		if err != nil {
			return nil, err
		}
	}
	var sums strings.Builder
	for _, f := range files {
		fmt.Fprintf(&sums, "%x  %s\n", f.sum, filepath.ToSlash(f.name))
	}
	if _, err := writeSynced(filepath.Join(tmp, "SHA256SUMS"), func(w io.Writer) (int64, error) {
		n, err := io.WriteString(w, sums.String())
		return int64(n), err
	}); err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		if err := syncDir(filepath.Join(tmp, "warehouses")); err != nil {
			return nil, err
		}
	}
	if err := syncDir(tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, target); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	done = true
	if err := syncDir(filepath.Dir(target)); err != nil {
		return nil, err
	}
	return files, nil
}

// writeSynced creates path, fills it with write and fsyncs it, and returns its size and
// SHA-256.
func writeSynced(path string, write func(io.Writer) (int64, error)) (backupFile, error) {
	var out backupFile
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return out, err
	}
	h := sha256.New()
	out.size, err = write(io.MultiWriter(f, h))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	copy(out.sum[:], h.Sum(nil))
	return out, err
}

// syncDir fsyncs a directory, so the entries made in it survive a crash.
func syncDir(path string) error {
	dir, err := os.Open(path)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// warehouseFiles lists the embedded warehouse files, directly or through the socket.
func warehouseFiles(d *dataAccess) ([]string, error) {
	if d.store == nil {
		var ids []string
		err := d.call("GET", "/v1/warehouses", nil, &ids)
		return ids, err
	}
	rs, err := warehouse.OpenRecordStore(d.dataDir)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	return rs.Files()
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
