package alerts

import (
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"

	"lookout/store"
)

// email sends a plain-text and HTML message over SMTP, with STARTTLS (on unless turned
// off) and PLAIN authentication when a username is set. The password is the secret.
type email struct{}

type emailConfig struct {
	Host     string   `json:"host"`
	Port     int      `json:"port"`
	Username string   `json:"username,omitempty"`
	Password string   `json:"password,omitempty"`
	From     string   `json:"from"`
	To       []string `json:"to"`
	StartTLS *bool    `json:"starttls,omitempty"`
}

const maxRecipients = 50

func (email) parse(raw json.RawMessage, old map[string]string) (any, map[string]string, string, []store.FieldError) {
	var c emailConfig
	if errs := decodeStrict(raw, &c); errs != nil {
		return nil, nil, "", errs
	}
	var errs []store.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, store.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if c.Host == "" || len(c.Host) > 253 || strings.ContainsAny(c.Host, " /:@") {
		add("config.host", "must be a host name or address")
	}
	if c.Port < 1 || c.Port > 65535 {
		add("config.port", "must be 1 to 65535 (587 for submission with STARTTLS)")
	}
	if a, err := mail.ParseAddress(c.From); err != nil || a.Address != c.From {
		add("config.from", "must be one e-mail address, such as alerts@example.com")
	}
	if len(c.To) == 0 || len(c.To) > maxRecipients {
		add("config.to", "must list 1 to %d e-mail addresses", maxRecipients)
	}
	for i, to := range c.To {
		if a, err := mail.ParseAddress(to); err != nil || a.Address != to {
			add(fmt.Sprintf("config.to[%d]", i), "must be one e-mail address")
		}
	}
	if len(c.Username) > 200 {
		add("config.username", "must be at most 200 characters")
	}
	starttls := c.StartTLS == nil || *c.StartTLS
	secrets := map[string]string{}
	if c.Password != "" {
		secrets["password"] = keep(c.Password, old, "password")
	}
	if c.Username != "" && secrets["password"] == "" {
		add("config.password", "is required with a username")
	}
	if c.Username != "" && !starttls {
		add("config.starttls", "must be on when a password is sent")
	}
	return map[string]any{"host": c.Host, "port": c.Port, "username": c.Username, "from": c.From, "to": c.To, "starttls": starttls}, secrets, "", errs
}

func (email) view(public json.RawMessage, secrets map[string]string) (map[string]any, error) {
	var out map[string]any
	if err := json.Unmarshal(public, &out); err != nil {
		return nil, err
	}
	if p, ok := secrets["password"]; ok {
		out["password"] = mask(p)
	}
	return out, nil
}
