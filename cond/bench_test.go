package cond

import "testing"

// The column engine calls the typed methods once per row; these keep them cheap.

func BenchmarkMatchStringEq(b *testing.B) {
	c, err := Compile(TypeString, OpEq, "checkout")
	if err != nil {
		b.Fatal(err)
	}
	values := []string{"click", "view", "checkout", "purchase"}
	b.ReportAllocs()
	n := 0
	for i := 0; b.Loop(); i++ {
		if c.MatchString(values[i&3]) {
			n++
		}
	}
	_ = n
}

func BenchmarkMatchIntGt(b *testing.B) {
	c, err := Compile(TypeInteger, OpGt, 1000.0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for i := int64(0); b.Loop(); i++ {
		if c.MatchInt(i & 2047) {
			n++
		}
	}
	_ = n
}

func BenchmarkMatchJSONNumber(b *testing.B) {
	c, err := Compile(TypeNumber, OpLte, 12.5)
	if err != nil {
		b.Fatal(err)
	}
	v := any(jn("12.25"))
	b.ReportAllocs()
	for b.Loop() {
		c.Match(v)
	}
}
