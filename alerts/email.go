package alerts

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strconv"
	"strings"
	"time"

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

func (email) send(ctx context.Context, d *Dispatcher, ch *store.Channel, n *Notice) result {
	var c emailConfig
	if err := json.Unmarshal(ch.Public, &c); err != nil {
		return result{err: err, permanent: true}
	}
	msg, err := emailMessage(&c, n)
	if err != nil {
		return result{err: err, permanent: true}
	}
	err = smtpSend(ctx, d, &c, ch.Secrets["password"], msg)
	if err == nil {
		return result{status: 250}
	}
	r := result{err: err}
	var te *textproto.Error
	if errors.As(err, &te) {
		r.status = te.Code
		r.permanent = te.Code >= 500
	}
	return r
}

// smtpSend speaks SMTP: STARTTLS when configured (required, never skipped), PLAIN
// authentication when a username is set, one message to every recipient.
func smtpSend(ctx context.Context, d *Dispatcher, c *emailConfig, password string, msg []byte) error {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	cl, err := smtp.NewClient(conn, c.Host)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.Hello("lookout"); err != nil {
		return err
	}
	if c.StartTLS == nil || *c.StartTLS {
		if ok, _ := cl.Extension("STARTTLS"); !ok {
			return &textproto.Error{Code: 530, Msg: "the server does not offer STARTTLS, which this channel requires"}
		}
		if err := cl.StartTLS(&tls.Config{ServerName: c.Host, RootCAs: d.rootCAs, MinVersion: tls.VersionTLS12}); err != nil {
			return err
		}
	}
	if c.Username != "" {
		if err := cl.Auth(smtp.PlainAuth("", c.Username, password, c.Host)); err != nil {
			return err
		}
	}
	if err := cl.Mail(c.From); err != nil {
		return err
	}
	for _, to := range c.To {
		if err := cl.Rcpt(to); err != nil {
			return err
		}
	}
	w, err := cl.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return cl.Quit()
}

// emailMessage builds the message: a plain-text part and an HTML part of the same notice.
func emailMessage(c *emailConfig, n *Notice) ([]byte, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, part := range []struct{ typ, text string }{
		{"text/plain; charset=utf-8", n.text() + "\n"},
		{"text/html; charset=utf-8", emailHTML(n)},
	} {
		pw, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {part.typ}, "Content-Transfer-Encoding": {"quoted-printable"}})
		if err != nil {
			return nil, err
		}
		qw := quotedprintable.NewWriter(pw)
		if _, err := qw.Write([]byte(strings.ReplaceAll(part.text, "\n", "\r\n"))); err != nil {
			return nil, err
		}
		if err := qw.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	var m bytes.Buffer
	hdr := func(k, v string) { m.WriteString(k + ": " + v + "\r\n") }
	hdr("From", c.From)
	hdr("To", strings.Join(c.To, ", "))
	hdr("Subject", mime.QEncoding.Encode("utf-8", n.title()))
	hdr("Date", n.Timestamp.Format(time.RFC1123Z))
	hdr("Message-ID", "<"+n.DeliveryID+"@lookout>")
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", `multipart/alternative; boundary="`+mw.Boundary()+`"`)
	m.WriteString("\r\n")
	m.Write(body.Bytes())
	return m.Bytes(), nil
}

func emailHTML(n *Notice) string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html><html><body style=\"font-family:sans-serif\">")
	b.WriteString("<h2>" + html.EscapeString(n.title()) + "</h2>")
	for _, line := range strings.Split(n.text(), "\n")[1:] {
		b.WriteString("<p>" + html.EscapeString(line) + "</p>")
	}
	if n.Alert == nil {
		b.WriteString("<p>" + html.EscapeString(n.text()) + "</p>")
	}
	b.WriteString("<p style=\"color:#888\">Lookout · " + html.EscapeString(n.Type) + " · delivery " + html.EscapeString(n.DeliveryID) + "</p></body></html>")
	return b.String()
}
