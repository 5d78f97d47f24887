package clickhouse

import (
	"context"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"testing"

	"lookout/internal/testsrv"
	"lookout/store"
	"lookout/warehouse/external"
)

func serverEngine(t testing.TB) *Engine {
	s := testsrv.ClickHouse(t)
	e, err := Open(Config{URL: s.URL(), Database: s.Database, User: s.User, Password: s.Password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// FuzzLiteral: every string, integer and float the fuzzer makes, rendered by Literal,
// comes back from a real ClickHouse server unchanged (strings compared by their bytes, via
// hex, so quotes, backslashes, NUL and invalid UTF-8 are all checked).
func FuzzLiteral(f *testing.F) {
	for _, s := range []string{"", "'", "\\", "\\'", "''", "a'b\\c", "\x00", "\xff\xfe", "é日本🦆", "\n\r\t\b\f", "`", "{p:String}", "?", "$1", "\\x41", "'; DROP TABLE t; --"} {
		f.Add(s, int64(0), 0.0)
	}
	f.Add("", int64(math.MinInt64), 5e-324)
	f.Add("", int64(math.MaxInt64), -math.MaxFloat64)
	f.Add("", int64(-1), 0.1)
	eng := serverEngine(f)
	f.Fuzz(func(t *testing.T, s string, n int64, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			x = 0
		}
		st := &external.Statement{
			SQL:   "SELECT hex(" + Literal(s) + "), " + Literal(n) + ", " + Literal(x) + ", " + Literal(true) + ", " + Literal(nil),
			Types: []string{store.TypeString, store.TypeInteger, store.TypeNumber, store.TypeBoolean, store.TypeString},
		}
		rows, err := eng.Query(context.Background(), st)
		if err != nil {
			t.Fatalf("%q %d %v: %v", s, n, x, err)
		}
		r := rows[0]
		if got := r[0].(string); !strings.EqualFold(got, hex.EncodeToString([]byte(s))) {
			t.Fatalf("string %q came back as hex %s", s, got)
		}
		if r[1] != n || r[2] != x || r[3] != true || r[4] != nil {
			t.Fatalf("values %d %s came back as %v", n, strconv.FormatFloat(x, 'g', -1, 64), r[1:])
		}
	})
}

func TestLiteral(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{nil, "NULL"}, {"a'b\\c", `'a\x27b\x5Cc'`}, {"\x00\xff", `'\x00\xFF'`}, {int64(-5), "-5"}, {uint64(7), "7"},
		{1.5, "1.5"}, {1e21, "1e+21"}, {math.NaN(), "NULL"}, {true, "1"}, {false, "0"},
		{5e-324, "reinterpretAsFloat64(unhex('0100000000000000'))"},
	}
	for _, c := range cases {
		if got := Literal(c.v); got != c.want {
			t.Errorf("Literal(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
	if got := Ident("a`b"); got != "`a\\x60b`" {
		t.Errorf("Ident: %s", got)
	}
}
