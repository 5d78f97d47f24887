package alerts

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"lookout/store"
)

// webhook posts JSON to a URL, signed by the Standard Webhooks scheme (CONTRACTS §6). The
// signing secret and every header value are secrets.
type webhook struct{}

type webhookConfig struct {
	URL           string            `json:"url"`
	Headers       map[string]string `json:"headers,omitempty"`
	SigningSecret string            `json:"signing_secret,omitempty"`
}

// reservedHeaders are what Lookout sets on every webhook request itself.
var reservedHeaders = map[string]bool{"Content-Type": true, "Content-Length": true, "Host": true,
	"Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true, "Transfer-Encoding": true}

const (
	maxHeaders     = 20
	secretPrefix   = "whsec_"
	minSecretBytes = 24
	maxSecretBytes = 64
)

// NewSigningSecret returns a fresh whsec_ secret of 32 random bytes.
func NewSigningSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// signingKey decodes a whsec_ secret; ok is false when it is not one.
func signingKey(secret string) ([]byte, bool) {
	raw, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, false
	}
	k, err := base64.StdEncoding.DecodeString(raw)
	return k, err == nil && len(k) >= minSecretBytes && len(k) <= maxSecretBytes
}

func (webhook) parse(raw json.RawMessage, old map[string]string) (any, map[string]string, string, []store.FieldError) {
	var c webhookConfig
	if errs := decodeStrict(raw, &c); errs != nil {
		return nil, nil, "", errs
	}
	errs := checkURL("config.url", c.URL)
	secrets := map[string]string{}
	if len(c.Headers) > maxHeaders {
		errs = append(errs, store.FieldError{Field: "config.headers", Message: "may hold at most 20 headers"})
	}
	var names []string
	for name, v := range c.Headers {
		canon := http.CanonicalHeaderKey(name)
		switch {
		case reservedHeaders[canon]:
			errs = append(errs, store.FieldError{Field: "config.headers." + name, Message: "is set by Lookout on every request and cannot be overridden"})
		case name == "" || strings.ContainsAny(name, " :\r\n\t") || len(name) > 100:
			errs = append(errs, store.FieldError{Field: "config.headers." + name, Message: "is not a valid header name"})
		case strings.ContainsAny(v, "\r\n") || len(v) > 4096:
			errs = append(errs, store.FieldError{Field: "config.headers." + name, Message: "must be one line of at most 4096 bytes"})
		default:
			secrets["header:"+canon] = keep(v, old, "header:"+canon)
			names = append(names, canon)
		}
	}
	generated := ""
	switch {
	case c.SigningSecret == "" && old["signing_secret"] != "":
		secrets["signing_secret"] = old["signing_secret"] // left out on update: kept
	case c.SigningSecret == "":
		generated = NewSigningSecret()
		secrets["signing_secret"] = generated
	default:
		s := keep(c.SigningSecret, old, "signing_secret")
		if _, ok := signingKey(s); !ok {
			errs = append(errs, store.FieldError{Field: "config.signing_secret", Message: "must be whsec_ followed by the base64 of 24 to 64 random bytes (leave it out to have one made)"})
		}
		secrets["signing_secret"] = s
	}
	return map[string]any{"url": c.URL, "header_names": names}, secrets, generated, errs
}

func (webhook) view(public json.RawMessage, secrets map[string]string) (map[string]any, error) {
	var p struct {
		URL         string   `json:"url"`
		HeaderNames []string `json:"header_names"`
	}
	if err := json.Unmarshal(public, &p); err != nil {
		return nil, err
	}
	headers := map[string]string{}
	for _, n := range p.HeaderNames {
		headers[n] = mask(secrets["header:"+n])
	}
	return map[string]any{"url": p.URL, "headers": headers, "signing_secret": mask(secrets["signing_secret"])}, nil
}

// Sign returns the webhook-signature value of a Standard Webhooks message: v1, then the
// base64 of HMAC-SHA256 keyed with the secret's bytes over id.timestamp.body.
func Sign(key []byte, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func (webhook) send(ctx context.Context, d *Dispatcher, ch *store.Channel, n *Notice) result {
	var p struct {
		URL         string   `json:"url"`
		HeaderNames []string `json:"header_names"`
	}
	if err := json.Unmarshal(ch.Public, &p); err != nil {
		return result{err: err, permanent: true}
	}
	key, ok := signingKey(ch.Secrets["signing_secret"])
	if !ok {
		return result{err: errors.New("the channel's signing secret is not a whsec_ secret"), permanent: true}
	}
	body := marshalNotice(n)
	req, err := newRequest(ctx, p.URL, body)
	if err != nil {
		return result{err: err, permanent: true}
	}
	for _, h := range p.HeaderNames {
		req.Header.Set(h, ch.Secrets["header:"+h])
	}
	ts := strconv.FormatInt(n.Timestamp.Unix(), 10)
	req.Header.Set("Webhook-Id", n.DeliveryID)
	req.Header.Set("Webhook-Timestamp", ts)
	req.Header.Set("Webhook-Signature", Sign(key, n.DeliveryID, ts, body))
	return d.post(req)
}
