package query

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"lookout/internal/testsrv"
	"lookout/store"
	"lookout/warehouse"
	"lookout/warehouse/clickhouse"
	"lookout/warehouse/external"
	"lookout/warehouse/postgres"
)

// The differential test, unchanged, against real PostgreSQL and ClickHouse servers: the
// same random records go through an outbox (the path the sink reads) into each engine,
// and the same random queries must give, byte for byte, the naive evaluator's rows.

func openPostgres(t *testing.T) external.Engine {
	s := testsrv.Postgres(t)
	e, err := postgres.Open(postgres.Config{Host: "127.0.0.1", Port: s.Port, Database: s.Database, User: s.User, Password: s.Password, SSLMode: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func openClickHouse(t *testing.T) external.Engine {
	s := testsrv.ClickHouse(t)
	e, err := clickhouse.Open(clickhouse.Config{URL: s.URL(), Database: s.Database, User: s.User, Password: s.Password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// shipDiff loads the records into a fresh table of the engine through an outbox.
func shipDiff(t *testing.T, eng external.Engine, m *store.Model, raws [][]byte) {
	t.Helper()
	rs, err := warehouse.OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	l, err := rs.Outbox(m.WarehouseID)
	if err != nil {
		t.Fatal(err)
	}
	appendDiff(t, l, raws, 0, false)
	ctx := context.Background()
	tbl := external.TableFor(m)
	if err := eng.EnsureTable(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	var rows [][]any
	last, err := l.ReadOutbox(diffModel.ID, 0, len(raws)+1, 1<<30, func(r *warehouse.OutboxRecord) error {
		rows = append(rows, tbl.Row(r, nil))
		return nil
	})
	if err != nil || len(rows) != len(raws) || last != uint64(len(raws)) {
		t.Fatalf("read %d of %d records (last %d): %v", len(rows), len(raws), last, err)
	}
	for start := 0; start < len(rows); start += 700 {
		if err := eng.Insert(ctx, tbl, rows[start:min(start+700, len(rows))]); err != nil {
			t.Fatal(err)
		}
	}
	// Delivered twice: the engine must still hold each record once.
	if err := eng.Insert(ctx, tbl, rows[:100]); err != nil {
		t.Fatal(err)
	}
}

func engineRunners(name string, eng external.Engine) func(t *testing.T, raws [][]byte) []diffRunner {
	n := 0
	return func(t *testing.T, raws [][]byte) []diffRunner {
		n++
		m := *diffModel
		m.Key = fmt.Sprintf("events_%d", n)
		shipDiff(t, eng, &m, raws)
		return []diffRunner{{name, func(q *store.QuerySpec) (*Result, error) {
			return RunExternal(context.Background(), eng, &Request{Model: &m, Query: q, Now: diffBase, Caps: DefaultCaps})
		}}}
	}
}

func TestDifferentialPostgres(t *testing.T) {
	eng := openPostgres(t)
	differential(t, engineRunners("postgres", eng))
}

func TestDifferentialClickHouse(t *testing.T) {
	eng := openClickHouse(t)
	differential(t, engineRunners("clickhouse", eng))
}

// TestCompileSQL shows the statements for both dialects: values bound or rendered, never
// pasted; identifiers quoted.
func TestCompileSQL(t *testing.T) {
	q := store.QuerySpec{
		Filters:      []store.Filter{{Field: "s", Op: "eq", Value: "x'); DROP TABLE t; --"}, {Field: "i", Op: "in", Value: []any{1.0, 2.0}}},
		GroupBy:      []string{"s"},
		Aggregations: []store.Aggregation{{Fn: "count", As: "n"}, {Fn: "avg", Field: "i"}},
		OrderBy:      []store.OrderBy{{Field: "n", Desc: true}},
		TimeRange:    &store.TimeRange{From: "2026-11-20T00:00:00Z"},
	}
	req := &Request{Model: diffModel, Query: &q, Required: []store.Filter{{Field: "b", Op: "eq", Value: true}}, Now: diffBase}
	pg, err := postgres.Open(postgres.Config{Host: "127.0.0.1", Port: 1, Database: "d", User: "u"})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	ch, _ := clickhouse.Open(clickhouse.Config{URL: "http://127.0.0.1:1", Database: "d"})
	cases := []struct {
		name string
		d    external.Dialect
		sql  string
		args int
	}{
		{"postgres", pg.Dialect(), `SELECT "s" AS "__c0", count(*) AS "__c1", (sum("i")::float8 / nullif(count("i"), 0)) AS "__c2" FROM "public"."events" WHERE ("b" IS NOT NULL AND "b" = $1::boolean) AND ("s" IS NOT NULL AND "s" = $2::text) AND ("i" IS NOT NULL AND "i" IN ($3::bigint, $4::bigint)) AND coalesce("t", "_received_at") >= $5::bigint GROUP BY "s" ORDER BY "__c1" DESC NULLS LAST, "__c0" ASC NULLS FIRST LIMIT 1000`, 5},
		{"clickhouse", ch.Dialect(), "SELECT `s` AS `__c0`, count(*) AS `__c1`, if(count(`i`) = 0, NULL, toFloat64(sum(toDecimal128(`i`, 0))) / count(`i`)) AS `__c2` FROM `d`.`events` FINAL WHERE (`b` IS NOT NULL AND `b` = 1) AND (`s` IS NOT NULL AND `s` = 'x\\x27); DROP TABLE t; --') AND (`i` IS NOT NULL AND `i` IN (1, 2)) AND coalesce(`t`, `_received_at`) >= 1795132800000000 GROUP BY `s` ORDER BY `__c1` DESC NULLS LAST, `__c0` ASC NULLS FIRST LIMIT 1000", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := CompileSQL(c.d, "events", req)
			if err != nil {
				t.Fatal(err)
			}
			if st.SQL != c.sql || len(st.Args) != c.args {
				t.Fatalf("got  %s (%d args)\nwant %s (%d args)", st.SQL, len(st.Args), c.sql, c.args)
			}
			if strings.Contains(st.SQL, "DROP TABLE t; --'") && c.args > 0 {
				t.Fatal("a value was written into PostgreSQL SQL")
			}
		})
	}
}
