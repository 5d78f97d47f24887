package store

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Display text (names, descriptions) is shown in the console, in logs and in terminals: a
// control character there hides text, moves the cursor or forges log lines. Names are one
// line of printable text; descriptions may also hold line breaks (\n) and tabs.

// WithArticle puts "a" or "an" before a noun phrase for a message: "an ingest client",
// "a query client".
func WithArticle(s string) string {
	if s != "" && strings.ContainsRune("aeiouAEIOU", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// controlIn returns the first C0 or C1 control character or DEL in s, except those
// allowed, and whether there was one.
func controlIn(s string, allowed string) (rune, bool) {
	i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && !strings.ContainsRune(allowed, r) })
	if i < 0 {
		return 0, false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return r, true
}

// name reports a display name that holds a control character.
func (f *fieldErrors) name(field, v string) {
	if r, bad := controlIn(v, ""); bad {
		f.add(field, "must not contain control characters (found U+%04X)", r)
	}
}

// text reports a description that holds a control character other than \n and \t.
func (f *fieldErrors) text(field, v string) {
	if r, bad := controlIn(v, "\n\t"); bad {
		f.add(field, "must not contain control characters other than line breaks (\\n) and tabs (found U+%04X)", r)
	}
}
