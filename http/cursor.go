package http

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"lookout/store"
)

// Cursors are opaque to clients but not trusted from them: a cursor carries the id to
// resume after and a MAC over that id and the list it was issued for (the route's path
// below the API root, and every query parameter but cursor and limit). A cursor that was
// altered, made up, or issued for another list (another route, another project_id, another
// filter) is a 400 instead of silently serving some other page.

// cursorVersion is the first byte of every cursor, so the format can change later.
const cursorVersion = 1

// cursorMACSize is the length of the truncated HMAC-SHA256 tag: 128 bits stop forgery.
const cursorMACSize = 16

// maxCursorID bounds the resume id a cursor may carry (ids are a prefix and 26 chars).
const maxCursorID = 64

// cursorCodec seals and opens list cursors with one key.
type cursorCodec struct{ key []byte }

func newCursorCodec(key []byte) cursorCodec {
	if len(key) == 0 {
		// Without a configured key, cursors live as long as the process: a client paging
		// across a restart gets a 400 and starts again, which is safe.
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	return cursorCodec{key: append([]byte(nil), key...)}
}

func (c cursorCodec) mac(list, after string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("lookout list cursor\x00"))
	m.Write([]byte(list))
	m.Write([]byte{0})
	m.Write([]byte(after))
	return m.Sum(nil)[:cursorMACSize]
}

// seal returns the cursor that resumes list after the item with id after.
func (c cursorCodec) seal(list, after string) string {
	b := make([]byte, 0, 1+cursorMACSize+len(after))
	b = append(b, cursorVersion)
	b = append(b, c.mac(list, after)...)
	b = append(b, after...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// open returns the id a cursor resumes after, or a validation_failed error naming the
// cursor when it was not issued by this server for this list.
func (c cursorCodec) open(list, cursor string) (string, error) {
	// Strict: one cursor has one spelling (the lax decoder ignores stray low bits in the
	// last character, which would let two spellings name the same cursor).
	b, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	if err != nil || len(b) < 1+cursorMACSize+1 || len(b) > 1+cursorMACSize+maxCursorID || b[0] != cursorVersion {
		return "", errBadCursor()
	}
	after := string(b[1+cursorMACSize:])
	if !hmac.Equal(b[1:1+cursorMACSize], c.mac(list, after)) {
		return "", errBadCursor()
	}
	return after, nil
}

func errBadCursor() error {
	return store.Invalid(store.FieldError{Field: "cursor", Message: "is not a cursor this server issued for this list; send the next_cursor of the previous page unchanged, with the same path and query parameters, or leave cursor out to start again"})
}

// listIdentity names the list a request reads: its path below the API root (the console
// and Management roots serve the same lists) and its query parameters other than cursor
// and limit, in a canonical order.
func listIdentity(r *http.Request) string {
	path := r.URL.Path
	for _, b := range []base{consoleBase, managementBase} {
		if strings.HasPrefix(path, b.prefix+"/") {
			path = path[len(b.prefix):]
			break
		}
	}
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		if k != "cursor" && k != "limit" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteString(path)
	for _, k := range keys {
		for _, v := range q[k] {
			sb.WriteByte(0)
			sb.WriteString(url.QueryEscape(k))
			sb.WriteByte('=')
			sb.WriteString(url.QueryEscape(v))
		}
	}
	return sb.String()
}

// intParam reads an optional integer query parameter within lo..hi (def when absent; a
// present but empty or out-of-range value is a 400 naming it).
func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v, ok := r.URL.Query()[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < lo || n > hi {
		return 0, store.Invalid(store.FieldError{Field: name, Message: fmt.Sprintf("must be an integer from %d to %d", lo, hi)})
	}
	return n, nil
}

// pageParams reads limit (default 50, 1..200; present but empty is a 400 too) and cursor.
func (s *Server) pageParams(r *http.Request) (store.Page, error) {
	q := r.URL.Query()
	p := store.Page{Limit: 50}
	var err error
	if p.Limit, err = intParam(r, "limit", 50, 1, 200); err != nil {
		return p, err
	}
	if _, ok := q["cursor"]; ok {
		after, err := s.cursors.open(listIdentity(r), q.Get("cursor"))
		if err != nil {
			return p, err
		}
		p.After = after
	}
	return p, nil
}

// writePage answers with one page of a list; next is the id the next page resumes after
// ("" on the last page), sealed into next_cursor for this request's list.
func (s *Server) writePage(w http.ResponseWriter, r *http.Request, items any, next string) {
	cursor := ""
	if next != "" {
		cursor = s.cursors.seal(listIdentity(r), next)
	}
	writeList(w, items, cursor)
}
