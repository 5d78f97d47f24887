package cond

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// maxExactFloat bounds the floats read as integers: above 2^53 a float64 no longer holds
// every integer, so 2^53+1 sent as a float would silently compare as 2^53.
const maxExactFloat = 1 << 53

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// toInt reads an integral JSON number. A json.Number is read exactly as an int64 first, so
// large ids keep every digit; floats must be integral and below 2^53 in size. It does not
// allocate for valid numbers (strconv's errors do, so the integer case is parsed by hand).
func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if i, ok := parseInt(string(n)); ok {
			return i, true
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return 0, false
		}
		return floatToInt(f)
	case float64:
		return floatToInt(n)
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

func floatToInt(f float64) (int64, bool) {
	if f != math.Trunc(f) || math.Abs(f) >= maxExactFloat {
		return 0, false
	}
	return int64(f), true
}

// parseInt parses an optionally signed run of decimal digits that fits an int64.
func parseInt(s string) (int64, bool) {
	neg := false
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	var u uint64
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		u = u*10 + uint64(d) // 19 digits fit a uint64
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return int64(-u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// toFloat reads any JSON number. Non-finite floats pass through (JSON cannot carry them),
// so Match and MatchFloat agree on every float64.
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}

// toTime reads a timestamp as µs since the epoch: an RFC 3339 string or non-negative
// epoch milliseconds.
// IntValue reads an integer field's value as Match does (an integer, or a number with no
// fraction such as 5.0 or 1e1).
func IntValue(v any) (int64, bool) { return toInt(v) }

// TimeValue reads a timestamp field's value as Match does (an RFC 3339 string, or epoch
// milliseconds as a number) in µs since the epoch.
func TimeValue(v any) (int64, bool) { return toTime(v) }

func toTime(v any) (int64, bool) {
	if s, ok := v.(string); ok {
		return ParseTime(s)
	}
	if _, ok := v.(bool); ok {
		return 0, false
	}
	ms, ok := toInt(v)
	if !ok || ms < 0 || ms > math.MaxInt64/1000 {
		return 0, false
	}
	return ms * 1000, true
}

// ParseTime parses an RFC 3339 timestamp to µs since the epoch, dropping digits below µs.
// It is the one reading of timestamp strings: conditions, and the warehouse's columns and
// record times, so a value and an operand always compare alike.
// The common shapes are parsed by hand because time.Parse allocates a zone for every
// numeric offset; anything else falls back to time.Parse, which stays the judge of what is
// valid (ingest validates with it, and accepts a few more shapes such as a comma before the
// fraction or a one-digit hour).
func ParseTime(s string) (int64, bool) {
	if us, ok := parseRFC3339(s); ok {
		return us, true
	}
	// time.Parse fixes the first 11 bytes (YYYY-MM-DDT) too; without them it would only
	// allocate an error.
	if len(s) < 11 || s[4] != '-' || s[7] != '-' || s[10] != 'T' {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return t.UnixMicro(), true
}

// parseRFC3339 accepts YYYY-MM-DDTHH:MM:SS[.1-9 digits](Z|±HH:MM) with valid fields, a
// subset of what time.Parse accepts for RFC3339Nano (a test holds it to that).
func parseRFC3339(s string) (int64, bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	rest := s[19:]
	var frac int64 // µs
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return 0, false
		}
		for i := 1; i <= 6; i++ {
			frac *= 10
			if i < n {
				frac += int64(rest[i] - '0')
			}
		}
		rest = rest[n:]
	}
	var offset int64 // seconds east of UTC
	switch {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := digits(rest[1:3])
		om, ok2 := digits(rest[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false
		}
		offset = int64(oh*3600 + om*60)
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	secs := daysFromCivil(int64(year), int64(month), int64(day))*86400 +
		int64(hour*3600+minute*60+sec) - offset
	return secs*1_000_000 + frac, true
}

func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		n = n*10 + int(d)
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil counts days from 1970-01-01 to a proleptic Gregorian date (Howard
// Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
