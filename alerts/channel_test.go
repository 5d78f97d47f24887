package alerts

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzChannelConfig: every configuration, of every channel type, is either refused with
// field errors or split into a public part and secrets whose view shows no secret of 12 or
// more characters, and sending that view back keeps every secret as it was.
func FuzzChannelConfig(f *testing.F) {
	f.Add("webhook", `{"url":"https://x.example/h","headers":{"X-Key":"0123456789abcdef"},"signing_secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`)
	f.Add("webhook", `{"url":"http://127.0.0.1:9/","headers":{"content-type":"x"}}`)
	f.Add("slack", `{"url":"https://chat.example/hooks/T0/B0/secret-secret"}`)
	f.Add("email", `{"host":"smtp.example","port":587,"username":"u","password":"password-123456","from":"a@example.com","to":["b@example.com"]}`)
	f.Add("email", `{"host":"h","port":25,"from":"a@example.com","to":["b@example.com"],"starttls":false}`)
	f.Add("webhook", `null`)
	f.Fuzz(func(t *testing.T, typ, raw string) {
		ct, ok := channelTypes[typ]
		if !ok {
			return
		}
		public, secrets, generated, errs := ct.parse(json.RawMessage(raw), map[string]string{})
		if len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" || e.Message == "" {
					t.Fatalf("an error without a field or message: %+v", e)
				}
			}
			return
		}
		if generated != "" && secrets["signing_secret"] != generated {
			t.Fatalf("generated %q but stored %q", generated, secrets["signing_secret"])
		}
		pub, err := json.Marshal(public)
		if err != nil {
			t.Fatal(err)
		}
		view, err := ct.view(pub, secrets)
		if err != nil {
			t.Fatal(err)
		}
		shown, _ := json.Marshal(view)
		for k, s := range secrets {
			if len([]rune(s)) >= 12 && strings.Contains(string(shown), s) {
				t.Fatalf("secret %s shows in the view: %s", k, shown)
			}
		}
		// The view sent back (as a PUT does) keeps every secret.
		back, _ := json.Marshal(view)
		_, again, _, errs := ct.parse(back, secrets)
		if len(errs) > 0 {
			t.Fatalf("the view does not parse back: %v (%s)", errs, back)
		}
		for k, s := range secrets {
			if again[k] != s {
				t.Fatalf("secret %s changed on a round trip: %q -> %q", k, s, again[k])
			}
		}
	})
}

// TestMask: short secrets show nothing; long ones their last four characters.
func TestMask(t *testing.T) {
	for in, want := range map[string]string{"": "****", "short": "****", "abcdefghijk": "****", "abcdefghijkl": "****ijkl", "ünïcödé-sêcrét": "****crét"} {
		if got := mask(in); got != want {
			t.Errorf("mask(%q) = %q, want %q", in, got, want)
		}
	}
}
