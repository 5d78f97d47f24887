package alerts

import (
	"testing"

	"lookout/store"
)

// TestCanonicalGroupValues: spellings of one value name one group — -0 and 0, an instant
// with an offset, as epoch milliseconds or with a zero fraction (found by review).
func TestCanonicalGroupValues(t *testing.T) {
	for _, c := range []struct{ typ, a, b string }{
		{store.TypeNumber, "0", "-0"},
		{store.TypeNumber, "0", "-0.0"},
		{store.TypeTimestamp, `"2026-11-21T13:00:00Z"`, `"2026-11-21T14:00:00+01:00"`},
		{store.TypeTimestamp, `"2026-11-21T13:00:00Z"`, `1795266000000`},
		{store.TypeTimestamp, `"2026-11-21T13:00:00Z"`, `"2026-11-21T13:00:00.000Z"`},
		{store.TypeInteger, "5", "5.0"},
		{store.TypeString, `"DE"`, `"\u0044E"`},
	} {
		if x, y := canonical(c.typ, []byte(c.a)), canonical(c.typ, []byte(c.b)); string(x) != string(y) {
			t.Errorf("%s: %s and %s name two groups (%s vs %s)", c.typ, c.a, c.b, x, y)
		}
	}
}
