// Package engines opens the engine of an external warehouse by its type: the one place
// that knows every engine package, so the sink, the connection test and tests all dial
// alike.
package engines

import (
	"context"
	"errors"
	"fmt"

	"lookout/store"
	"lookout/warehouse/clickhouse"
	"lookout/warehouse/external"
	"lookout/warehouse/postgres"
)

// Dial opens the engine of an external warehouse, signing in as username with
// secret (its credential's). Opening checks the configuration only; Ping connects. An
// error is an external.Error (its message safe to show) or, for an embedded or unknown
// type, a plain error.
func Dial(w store.Warehouse, username, secret string) (external.Engine, error) {
	var (
		e   external.Engine
		err error
	)
	switch w.Type {
	case store.WarehouseClickHouse:
		var ch *clickhouse.Engine
		ch, err = clickhouse.Open(clickhouse.Config{URL: w.Config.URL, Database: w.Config.Database, User: username, Password: secret})
		e = ch
	case store.WarehousePostgres:
		var pg *postgres.Engine
		pg, err = postgres.Open(postgres.Config{Host: w.Config.Host, Port: w.Config.Port, Database: w.Config.Database,
			Schema: w.Config.Schema, SSLMode: w.Config.SSLMode, User: username, Password: secret})
		e = pg
	default:
		return nil, fmt.Errorf("warehouse type %q has no external engine", w.Type)
	}
	if err != nil {
		var ee *external.Error
		if !errors.As(err, &ee) {
			// Open's own configuration complaints are plain errors: give them the engine's
			// name and keep the secret out, so the caller may show them.
			err = external.Errorf(w.Type, []string{secret}, "%s", err)
		}
		return nil, err
	}
	return e, nil
}

// Test opens the engine, pings it and closes it: the check run when a warehouse is
// created or updated, and by POST /warehouses/{id}/test.
func Test(ctx context.Context, w store.Warehouse, username, secret string) error {
	e, err := Dial(w, username, secret)
	if err != nil {
		return err
	}
	defer e.Close()
	return e.Ping(ctx)
}
