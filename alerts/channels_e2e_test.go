package alerts

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http/httptest"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"lookout/store"
)

// smtpSink is a real SMTP server (emersion/go-smtp) that offers STARTTLS and PLAIN and
// keeps what it receives, noting whether the message came over TLS and authenticated.
type smtpSink struct {
	mu   sync.Mutex
	msgs []sinkMsg
}

type sinkMsg struct {
	from string
	to   []string
	data []byte
	tls  bool
	user string
}

type sinkSession struct {
	sink *smtpSink
	conn *smtp.Conn
	cur  sinkMsg
}

func (s *smtpSink) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &sinkSession{sink: s, conn: c}, nil
}

func (s *sinkSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *sinkSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != "alerts" || password != "smtp-password-123" {
			return errors.New("bad credentials")
		}
		s.cur.user = username
		return nil
	}), nil
}
func (s *sinkSession) Mail(from string, _ *smtp.MailOptions) error { s.cur.from = from; return nil }
func (s *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.to = append(s.cur.to, to)
	return nil
}
func (s *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, s.cur.tls = s.conn.TLSConnectionState()
	s.cur.data = b
	s.sink.mu.Lock()
	s.sink.msgs = append(s.sink.msgs, s.cur)
	s.sink.mu.Unlock()
	return nil
}
func (s *sinkSession) Reset()        { s.cur = sinkMsg{user: s.cur.user} }
func (s *sinkSession) Logout() error { return nil }

// startSMTP serves the sink on loopback with a certificate for 127.0.0.1 and returns its
// port and a pool that trusts the certificate.
func startSMTP(t *testing.T, sink *smtpSink) (int, *x509.CertPool) {
	ts := httptest.NewUnstartedServer(nil) // only to borrow its 127.0.0.1 certificate
	ts.StartTLS()
	cert, pool := ts.TLS.Certificates[0], x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	ts.Close()
	srv := smtp.NewServer(sink)
	srv.Domain = "127.0.0.1"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, pool
}

// TestEmailOverSTARTTLS: an opening goes by e-mail over STARTTLS with PLAIN auth, with a
// plain-text and an HTML part, and nothing of the record the alert does not select.
func TestEmailOverSTARTTLS(t *testing.T) {
	f := newFixture(t)
	sink := &smtpSink{}
	port, pool := startSMTP(t, sink)
	f.svc = New(Config{Store: f.st, Clock: f.clock, RootCAs: pool})
	cfg, _ := json.Marshal(map[string]any{"host": "127.0.0.1", "port": port, "username": "alerts", "password": "smtp-password-123",
		"from": "lookout@example.com", "to": []string{"oncall@example.com", "boss@example.com"}})
	ch, err := f.svc.CreateChannel(f.project, ChannelInput{Name: ptr("mail"), Type: ptr(ChannelEmail), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	f.alert(ch.ID)
	f.ingest(order("o1", "DE", "failed", 12.5))
	f.run(f.clock.Now())
	ds := f.deliveries(store.DeliveryFilter{})
	if len(ds) != 1 || ds[0].Status != store.DeliveryDelivered {
		t.Fatalf("delivery %+v", ds)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.msgs) != 1 {
		t.Fatalf("the SMTP server got %d messages", len(sink.msgs))
	}
	m := sink.msgs[0]
	if !m.tls || m.user != "alerts" || m.from != "lookout@example.com" || strings.Join(m.to, ",") != "oncall@example.com,boss@example.com" {
		t.Fatalf("message over tls=%v user=%q from=%q to=%v", m.tls, m.user, m.from, m.to)
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(m.data)))
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if !strings.Contains(subject, "failed orders") || !strings.Contains(subject, "critical") {
		t.Fatalf("subject %q", subject)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("content type %q %v", mt, err)
	}
	parts := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p) // multipart decodes quoted-printable
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		parts[ct] = string(b)
	}
	if !strings.Contains(parts["text/plain"], `"id":"o1"`) || !strings.Contains(parts["text/html"], "<h2>") {
		t.Fatalf("parts %q", parts)
	}
	if strings.Contains(string(m.data), "4111") {
		t.Fatal("the e-mail carries a field the alert does not select")
	}
}

// TestEmailRefusals: a server refusing the credentials gets no message; the attempt fails
// with the server's reason, the password nowhere in it.
func TestEmailRefusals(t *testing.T) {
	f := newFixture(t)
	sink := &smtpSink{}
	port, pool := startSMTP(t, sink)
	f.svc = New(Config{Store: f.st, Clock: f.clock, RootCAs: pool})
	cfg, _ := json.Marshal(map[string]any{"host": "127.0.0.1", "port": port, "username": "alerts", "password": "wrong-password-999",
		"from": "lookout@example.com", "to": []string{"oncall@example.com"}})
	ch, err := f.svc.CreateChannel(f.project, ChannelInput{Name: ptr("mail"), Type: ptr(ChannelEmail), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.svc.TestChannel(f.project, ch.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.run(f.clock.Now())
	d, _ = f.svc.Delivery(f.project, d.ID)
	// go-smtp answers a refused login with 454 (a temporary failure): retried later.
	if d.Status != store.DeliveryFailed || d.LastStatus != 454 || !strings.Contains(d.LastError, "bad credentials") || strings.Contains(d.LastError, "wrong-password-999") {
		t.Fatalf("bad credentials: %+v", d)
	}
	if len(sink.msgs) != 0 {
		t.Fatal("a message got through")
	}
}

// TestSlackPayload: a Slack-shaped receiver gets text and blocks (header, section, context).
func TestSlackPayload(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	cfg, _ := json.Marshal(map[string]any{"url": rc.srv.URL + "/services/T000/B000/XXXXXXXXXXXX"})
	ch, err := f.svc.CreateChannel(f.project, ChannelInput{Name: ptr("slack"), Type: ptr(ChannelSlack), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	f.alert(ch.ID)
	f.ingest(order("o1", "DE", "failed", 1))
	f.run(f.clock.Now())
	got := rc.all()
	if len(got) != 1 || got[0].path != "/services/T000/B000/XXXXXXXXXXXX" {
		t.Fatalf("slack receiver got %d", len(got))
	}
	var body struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type string `json:"type"`
			Text *struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"text"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(got[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body.Text, "failed orders") || len(body.Blocks) != 3 || body.Blocks[0].Type != "header" ||
		body.Blocks[0].Text.Type != "plain_text" || body.Blocks[1].Text.Type != "mrkdwn" || body.Blocks[2].Type != "context" {
		t.Fatalf("slack body %s", got[0].body)
	}
	if strings.Contains(string(got[0].body), "4111") {
		t.Fatal("the message carries a field the alert does not select")
	}
}
