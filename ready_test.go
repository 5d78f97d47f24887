package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"lookout/warehouse"
)

// TestWarehousesOpenBeforeReady: a restarted server opens (and upgrades) every warehouse
// file before its listeners serve, instead of on the first ingest request under the
// writer's lock.
func TestWarehousesOpenBeforeReady(t *testing.T) {
	dir := t.TempDir()
	rs, err := warehouse.OpenRecordStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := rs.Log("wh_existing")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]*warehouse.AppendBatch{{ModelID: "mdl_a", ReceivedAt: time.Unix(1, 0), Records: [][]byte{[]byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	rs.Close()
	m := &Main{opts: serveOptions{globalOptions: &globalOptions{dataDir: dir}, addr: "127.0.0.1:0", ingestAddr: "127.0.0.1:0", queryAddr: "127.0.0.1:0"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	if !m.Records.IsOpen("wh_existing") {
		t.Fatal("the warehouse file is not open although the server is serving")
	}
}
