package clickhouse

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"
)

// Literal renders a value as a ClickHouse literal (see AppendLiteral).
func Literal(v any) string { return string(AppendLiteral(nil, v)) }

// AppendLiteral appends the ClickHouse literal of a value: NULL; a string in single
// quotes with every byte that is not printable ASCII, the quote and the backslash written
// as \xHH, so any bytes at all (NUL, invalid UTF-8) reach the server unchanged and the
// statement stays ASCII; integers in decimal; a float64 in Go's shortest exact form
// (finite values only: non-finite ones, which JSON cannot carry, become NULL); booleans
// as 1 and 0. It is the one way values enter ClickHouse statements (18.16 has no query
// parameters); FuzzLiteral checks it against a real server.
func AppendLiteral(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "NULL"...)
	case string:
		return appendString(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return append(b, "NULL"...)
		}
		if x != 0 && math.Abs(x) < 0x1p-1022 {
			// ClickHouse 18.16's parser refuses subnormal literals: send the bits.
			var le [8]byte
			binary.LittleEndian.PutUint64(le[:], math.Float64bits(x))
			return append(append(append(b, "reinterpretAsFloat64(unhex('"...), hex.EncodeToString(le[:])...), "'))"...)
		}
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case bool:
		if x {
			return append(b, '1')
		}
		return append(b, '0')
	}
	panic("clickhouse: no literal for a value of this type")
}

const hexDigits = "0123456789ABCDEF"

func appendString(b []byte, s string) []byte {
	b = append(b, '\'')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\'' || c == '\\' {
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return append(b, '\'')
}

// Ident quotes an identifier in backquotes, escaping as strings are.
func Ident(name string) string {
	b := make([]byte, 0, len(name)+2)
	b = append(b, '`')
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c >= 0x7f || c == '`' || c == '\\' {
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return string(append(b, '`'))
}
