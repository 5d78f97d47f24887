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
	"os"
	"path/filepath"
	"time"

	"lookout/query"
	"lookout/store"
)

// dataAccess is how an offline command reaches the data: the store itself when no server
// holds it, or else the running server's admin socket.
type dataAccess struct {
	store   *store.Store // set when opened directly
	lock    *os.File     // the process lock, held while store is open
	client  *http.Client // set when talking to a running server
	dataDir string
}

func (d *dataAccess) Close() error {
	var err error
	if d.store != nil {
		err = d.store.Close()
	}
	if d.lock != nil {
		d.lock.Close() // releases the flock
	}
	return err
}

// openData opens the data dir for a command, or else reaches the server that holds it.
// mustExist refuses a missing data file (a check, backup or token of nothing is a mistake,
// not an empty success); otherwise the data dir and its file are made. readOnly (check,
// backup) changes nothing in the data dir: no lock file, no migration, no bucket, no key
// check is created.
func openData(g *globalOptions, mustExist, readOnly bool) (*dataAccess, error) {
	dbPath := filepath.Join(g.dataDir, "lookout.db")
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		if mustExist || readOnly {
			return nil, fmt.Errorf("no data file at %s (is --data-dir right?)", dbPath)
		}
		if err := os.MkdirAll(g.dataDir, 0o700); err != nil {
			return nil, err
		}
	}
	mode := lockExclusive
	if readOnly {
		mode = lockShared
	}
	const wait = 300 * time.Millisecond
	lock, err := lockDataDir(g.dataDir, mode, wait)
	if err == nil {
		var st *store.Store
		st, err = store.Open(dbPath, store.Options{LockTimeout: wait, ReadOnly: readOnly, QueryRules: query.Rules{}})
		if err == nil {
			return &dataAccess{store: st, lock: lock, dataDir: g.dataDir}, nil
		}
		if lock != nil {
			lock.Close()
		}
	}
	if !errors.Is(err, store.ErrLocked) {
		return nil, err
	}
	sock := filepath.Join(g.dataDir, "lookout.sock")
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := c.Get("http://lookout/healthz")
	if err != nil {
		return nil, fmt.Errorf("the data dir is held by another process, and its admin socket %s does not answer: %w", sock, err)
	}
	resp.Body.Close()
	return &dataAccess{client: c, dataDir: g.dataDir}, nil
}

// call sends a JSON request to the admin socket and decodes the envelope's data into out.
func (d *dataAccess) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, "http://lookout"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Error   bool            `json:"error"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("admin socket answered %s with an unreadable body", resp.Status)
	}
	if env.Error {
		return errors.New(env.Message)
	}
	return json.Unmarshal(env.Data, out)
}
