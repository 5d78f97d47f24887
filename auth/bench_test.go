package auth

import "testing"

// BenchmarkAuthenticateToken: parse, prefix lookup (one read transaction), constant-time
// hash compare and the owner checks, as every Management API request pays them.
func BenchmarkAuthenticateToken(b *testing.B) {
	svc, st, _ := newTest(b)
	o, ws, err := CreateOwner(st, "o@example.com", "password1", "O")
	if err != nil {
		b.Fatal(err)
	}
	tok, _, err := CreateToken(st, o.ID, TokenRequest{Name: "b", WorkspaceID: ws.ID, Scopes: AllScopes()})
	if err != nil {
		b.Fatal(err)
	}
	hdr := "Bearer " + tok
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := svc.AuthenticateToken(hdr); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAuthenticateRuntime: what every ingest and query request pays to authenticate a
// runtime API key: parse, hash, the cached key and client (a bbolt read and JSON decode
// only after a write), status, policy and model checks.
func BenchmarkAuthenticateRuntime(b *testing.B) {
	svc, st := newRuntimeTest(b)
	f := newRuntimeFixture(b, st)
	req := RuntimeRequest{Authorization: "ApiKey " + f.key, Transport: "http", Kind: "ingest"}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := svc.AuthenticateRuntime(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
