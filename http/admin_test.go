package http

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"lookout/warehouse"
)

// TestStalledBackupReaderDoesNotBlockWriters: a backup client that stops reading must not
// keep a write that grows the file (a bbolt remap, which waits for every open read
// transaction) from completing. The copy streams from a snapshot, not from a read
// transaction held open at the reader's pace.
func TestStalledBackupReaderDoesNotBlockWriters(t *testing.T) {
	h := newHarness(t)
	const id = "wh_stall"
	l, err := h.records.Log(id)
	if err != nil {
		t.Fatal(err)
	}
	// batch appends n records of 64 KiB in one transaction.
	batch := func(n int) error {
		recs := make([][]byte, n)
		for i := range recs {
			recs[i] = fmt.Appendf(nil, `{"pad":"%s"}`, bytes.Repeat([]byte{'x'}, 64<<10))
		}
		return l.Append([]*warehouse.AppendBatch{{ModelID: "mdl_a", ReceivedAt: time.Unix(1, 0), Records: recs}})
	}
	// Larger than any socket buffer, so the stream cannot finish into the kernel.
	if err := batch(64); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h.srv.AdminHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/backup/warehouses/%s HTTP/1.1\r\nHost: lookout\r\n\r\n", id)
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || status != "HTTP/1.1 200 OK\r\n" {
		t.Fatalf("status %q %v", status, err)
	}
	// The reader now stalls. Grow the file past its 64 MiB initial mapping: bbolt remaps.
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			err = batch(400)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute): // a deadlock guard, not a timing assertion
		t.Fatal("a write that grows the warehouse file waited for a stalled backup reader")
	}
	// The stalled stream still delivers the whole consistent copy once read.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	n, _ := io.Copy(io.Discard, io.LimitReader(conn, 4<<20))
	if n == 0 {
		t.Fatal("the stalled stream sent nothing")
	}
}
