package engines

import (
	"context"
	"strings"
	"testing"
	"time"

	"lookout/internal/testsrv"
	"lookout/store"
	"lookout/warehouse/external"
)

// TestWarehouseEngines drives Test, which serve hands the HTTP server as TestWarehouse,
// against real servers: the right password passes, a wrong one fails with the engine's
// complaint and without the password, and a bad address is an engine error too.
func TestWarehouseEngines(t *testing.T) {
	pg, ch := testsrv.Postgres(t), testsrv.ClickHouse(t)
	const wrong = "nope-7f3a9c21-wrong"
	for _, c := range []struct {
		srv       *testsrv.Server
		w         store.Warehouse
		complaint string
	}{
		{pg, store.Warehouse{Type: store.WarehousePostgres, Config: store.WarehouseConfig{Host: "127.0.0.1", Port: pg.Port, Database: pg.Database, Schema: "public", SSLMode: "disable"}}, "password authentication failed"},
		{ch, store.Warehouse{Type: store.WarehouseClickHouse, Config: store.WarehouseConfig{URL: ch.URL(), Database: ch.Database}}, "password"},
	} {
		t.Run(c.srv.Kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := Test(ctx, c.w, c.srv.User, c.srv.Password); err != nil {
				t.Fatalf("right password: %v", err)
			}
			err := Test(ctx, c.w, c.srv.User, wrong)
			msg := external.Message(err)
			if err == nil || !strings.Contains(strings.ToLower(msg), strings.ToLower(c.complaint)) || strings.Contains(msg, wrong) {
				t.Fatalf("wrong password: %q", msg)
			}
		})
	}
	bad := store.Warehouse{Type: store.WarehouseClickHouse, Config: store.WarehouseConfig{URL: "ftp://x"}}
	if err := Test(context.Background(), bad, "u", "s3cret"); !strings.HasPrefix(external.Message(err), "clickhouse: ") {
		t.Fatalf("bad url: %v", err)
	}
	if _, err := Dial(store.Warehouse{Type: store.WarehouseEmbedded}, "", ""); err == nil {
		t.Fatal("an embedded warehouse dialed")
	}
}
