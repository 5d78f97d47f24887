package cond

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func decodeJSON(b []byte, useNumber bool) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	if useNumber {
		d.UseNumber()
	}
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil, false
	}
	return v, true
}

// FuzzCompile: whatever the type, operator, value and record value, Compile does not panic;
// a compiled condition's Match does not panic, agrees with the typed method the column
// engine would call and with the reference evaluator, and Explain says something.
func FuzzCompile(f *testing.F) {
	for _, tc := range matchCases {
		value, _ := json.Marshal(tc.value)
		actual, _ := json.Marshal(tc.actual)
		f.Add(tc.typ, tc.op, value, actual, true)
	}
	for _, seed := range []struct{ typ, op, value, actual string }{
		{"string", "matches", `"(a+)+$"`, `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"`},
		{"string", "matches", `"\\8"`, `"x"`},
		{"integer", "in", `[1, 2.0, "3"]`, `2`},
		{"integer", "gt", `9223372036854775807`, `9223372036854775807`},
		{"timestamp", "lt", `"2026-01-02T03:04:05,5Z"`, `"2026-01-02T03:04:05.4+00:00"`},
		{"timestamp", "eq", `9223372036854775`, `"2262-04-11T23:47:16.854775Z"`},
		{"number", "eq", `1e308`, `1e309`},
		{"object", "exists", `null`, `{"a":[1,{"b":null}]}`},
	} {
		f.Add(seed.typ, seed.op, []byte(seed.value), []byte(seed.actual), false)
	}
	f.Fuzz(func(t *testing.T, typ, op string, valueJSON, actualJSON []byte, useNumber bool) {
		value, ok := decodeJSON(valueJSON, useNumber)
		if !ok {
			return
		}
		c, err := Compile(typ, op, value)
		if valid := refValid(typ, op, value); (err == nil) != valid {
			t.Fatalf("Compile(%s, %s, %#v) = %v; reference says valid %v", typ, op, value, err, valid)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not an *Error", err)
			}
			return
		}
		actual, ok := decodeJSON(actualJSON, useNumber)
		if !ok {
			return
		}
		got := c.Match(actual)
		if typed, ok := typedMatch(c, actual); ok && typed != got {
			t.Fatalf("%s %s %#v on %#v: Match %v, typed %v", typ, op, value, actual, got, typed)
		}
		if want := refMatch(typ, op, value, actual); got != want {
			t.Fatalf("%s %s %#v on %#v: Match %v, reference %v", typ, op, value, actual, got, want)
		}
		if c.Explain(actual, got) == "" {
			t.Fatal("empty explanation")
		}
		c.Bounds()
		c.Strings()
		c.Operand()
	})
}

// FuzzParseTime: the hand-written RFC 3339 parser accepts nothing time.Parse refuses and
// reads every accepted string to the same microsecond.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-01-02T03:04:05Z", "2024-02-29T23:59:59.999999999-23:59", "0000-01-01T00:00:00+01:00",
		"9999-12-31T23:59:59.1Z", "2026-01-02T03:04:05.Z", "2023-02-29T00:00:00Z", "2026-01-02T03:04:05+24:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		us, ok := parseRFC3339(s)
		tm, err := time.Parse(time.RFC3339Nano, s)
		if ok && err != nil {
			t.Fatalf("parseRFC3339(%q) accepted what time.Parse refuses: %v", s, err)
		}
		if ok && us != tm.UnixMicro() {
			t.Fatalf("parseRFC3339(%q) = %d, time.Parse gives %d", s, us, tm.UnixMicro())
		}
		if got, ok2 := ParseTime(s); (err == nil) != ok2 || (ok2 && got != tm.UnixMicro()) {
			t.Fatalf("ParseTime(%q) = %d, %v; time.Parse gives %d, %v", s, got, ok2, tm.UnixMicro(), err)
		}
	})
}
