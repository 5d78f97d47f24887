package http

import (
	"testing"
	"time"

	"lookout/limits"
)

// TestRegisterRefusedBeforeHashing: once an owner exists, registration is refused before
// any argon2id work or write: it is answered while every hash slot is taken, and it leaves
// the identity generation (the Management Token cache) alone (issue 7, item 10).
func TestRegisterRefusedBeforeHashing(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	gate := limits.NewGate(1, 0, time.Hour)
	h.auth.SetHashGate(gate)
	release, _ := gate.Enter() // no hash can run now
	defer release()
	gen := h.st.IdentityGeneration()
	r := h.do("POST", "/api/v1/auth/register", "", map[string]any{"email": "late@example.com", "password": w.password, "name": "Late"})
	r.checkEnvelope(t)
	if r.status != 403 || r.env.Code != "forbidden" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if g := h.st.IdentityGeneration(); g != gen {
		t.Fatalf("a refused registration moved the identity generation from %d to %d", gen, g)
	}
}

// TestPasswordChecksBounded: when every hash slot is busy, sign-in, registration and adding
// a new member answer 503 with Retry-After in the envelope, and work again once a slot
// frees (issue 7, item 10).
func TestPasswordChecksBounded(t *testing.T) {
	h := newHarness(t)
	gate := limits.NewGate(1, 0, time.Hour)
	h.auth.SetHashGate(gate)
	release, _ := gate.Enter()
	r := h.do("POST", "/api/v1/auth/register", "", map[string]any{"email": "first@example.com", "password": "correct horse battery", "name": "First"})
	r.checkEnvelope(t)
	if r.status != 503 || r.env.Code != "unavailable" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("register while busy: %d %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	release()
	w := h.world()
	release, _ = gate.Enter()
	for _, tc := range []struct {
		name, path, authz string
		body              map[string]any
	}{
		{"login, known address", "/api/v1/auth/login", "", map[string]any{"email": "owner@example.com", "password": w.password}},
		{"login, unknown address", "/api/v1/auth/login", "", map[string]any{"email": "nobody@example.com", "password": w.password}},
		{"new member", "/api/v1/workspaces/" + w.ws.ID + "/members", bearer(w.ownerSes), map[string]any{"email": "new@example.com", "password": w.password, "role": "member"}},
	} {
		r := h.do("POST", tc.path, tc.authz, tc.body)
		r.checkEnvelope(t)
		if r.status != 503 || r.env.Code != "unavailable" || r.header.Get("Retry-After") != "1" {
			t.Fatalf("%s while busy: %d %q %s", tc.name, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	release()
	if r := h.do("POST", "/api/v1/auth/login", "", map[string]any{"email": "owner@example.com", "password": w.password}); r.status != 200 {
		t.Fatalf("login after the slot freed: %d %s", r.status, r.body)
	}
}

// TestRegisterRateLimited: registration attempts are limited per address like sign-ins.
func TestRegisterRateLimited(t *testing.T) {
	h := newHarness(t)
	h.world()
	body := map[string]any{"email": "late@example.com", "password": "correct horse battery"}
	for i := 0; i < 10; i++ {
		if r := h.do("POST", "/api/v1/auth/register", "", body); r.status != 403 {
			t.Fatalf("attempt %d: %d %s", i+1, r.status, r.body)
		}
	}
	r := h.do("POST", "/api/v1/auth/register", "", body)
	r.checkEnvelope(t)
	if r.status != 429 || r.env.Code != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("eleventh attempt: %d %s", r.status, r.body)
	}
	h.clock.Advance(time.Minute)
	if r := h.do("POST", "/api/v1/auth/register", "", body); r.status != 403 {
		t.Fatalf("after a minute: %d %s", r.status, r.body)
	}
}
