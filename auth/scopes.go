package auth

import "sort"

// Scope families of the Management API (spec §5).
var Families = []string{"projects", "models", "warehouses", "clients", "analytics", "security", "alerts"}

// AllScopes lists every scope, sorted.
func AllScopes() []string {
	var out []string
	for _, f := range Families {
		out = append(out, f+":read", f+":write")
	}
	sort.Strings(out)
	return out
}

// ValidScope reports whether s is a known scope.
func ValidScope(s string) bool {
	for _, f := range Families {
		if s == f+":read" || s == f+":write" {
			return true
		}
	}
	return false
}

// RouteScope is the exact scope a route of a family needs: :read for GET (and HEAD),
// :write for every other method. :write never implies :read.
func RouteScope(family, method string) string {
	if method == "GET" || method == "HEAD" {
		return family + ":read"
	}
	return family + ":write"
}

// IsWrite reports whether a method changes state.
func IsWrite(method string) bool { return method != "GET" && method != "HEAD" }
