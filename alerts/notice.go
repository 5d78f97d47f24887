package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"lookout/store"
)

// Notice is what a delivery says, built when it goes out (so merged occurrences count): the
// JSON body of a webhook, and the facts the Slack and e-mail texts are made of. It carries
// the group values and the selected fields of the latest occurrence, never the rest of a
// record.
type Notice struct {
	Type           string            `json:"type"`
	DeliveryID     string            `json:"delivery_id"`
	Kind           string            `json:"kind"`
	Timestamp      time.Time         `json:"timestamp"`
	ProjectID      string            `json:"project_id"`
	Channel        NoticeChannel     `json:"channel"`
	Alert          *NoticeAlert      `json:"alert,omitempty"`
	Incident       *NoticeIncident   `json:"incident,omitempty"`
	NewOccurrences int64             `json:"new_occurrences"`
	Latest         *store.Occurrence `json:"latest_occurrence,omitempty"`
	Message        string            `json:"message"`
}

// NoticeChannel names the channel a notice goes through.
type NoticeChannel struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// NoticeAlert is the alert behind a notice.
type NoticeAlert struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Severity string `json:"severity"`
	ModelKey string `json:"model_key"`
}

// NoticeIncident is the incident a notice reports, as it stood when the notice went out.
type NoticeIncident struct {
	ID          string          `json:"id"`
	Status      string          `json:"status"`
	Group       json.RawMessage `json:"group"`
	Occurrences int64           `json:"occurrences"`
	FirstAt     time.Time       `json:"first_occurred_at"`
	LastAt      time.Time       `json:"last_occurred_at"`
}

var noticeTypes = map[string]string{store.NoticeOpening: "incident.opened", store.NoticeSummary: "incident.summary",
	store.NoticeResolution: "incident.resolved", store.NoticeTest: "test"}

// title is the one-line headline of a notice.
func (n *Notice) title() string {
	if n.Alert == nil {
		return "Lookout test notification"
	}
	what := map[string]string{store.NoticeOpening: "incident opened", store.NoticeSummary: "still firing",
		store.NoticeResolution: "resolved"}[n.Kind]
	return fmt.Sprintf("[%s] %s: %s", n.Alert.Severity, n.Alert.Name, what)
}

// text is the notice in plain words.
func (n *Notice) text() string {
	if n.Alert == nil {
		return fmt.Sprintf("This is a test notification from Lookout through channel %q (%s). If you can read it, the channel works.", n.Channel.Name, n.Channel.Type)
	}
	var b strings.Builder
	b.WriteString(n.title())
	fmt.Fprintf(&b, "\nIncident %s on model %s, group %s.", n.Incident.ID, n.Alert.ModelKey, compact(n.Incident.Group))
	switch n.Kind {
	case store.NoticeOpening:
		fmt.Fprintf(&b, "\n%d matching record(s) so far.", n.Incident.Occurrences)
	case store.NoticeSummary:
		fmt.Fprintf(&b, "\n%d new matching record(s) since the last notice, %d in all.", n.NewOccurrences, n.Incident.Occurrences)
	case store.NoticeResolution:
		fmt.Fprintf(&b, "\nResolved after %d matching record(s).", n.Incident.Occurrences)
	}
	if n.Latest != nil && n.Kind != store.NoticeResolution {
		fmt.Fprintf(&b, "\nLatest at %s: %s", n.Latest.At.UTC().Format(time.RFC3339), compact(n.Latest.Selected))
	}
	return b.String()
}

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}

// post sends one HTTP request and classifies the answer: 2xx delivered; 408, 429 and 5xx
// (and no answer at all) are worth retrying, honouring Retry-After; any other status is a
// permanent refusal.
func (d *Dispatcher) post(req *http.Request) result {
	resp, err := d.client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return result{status: resp.StatusCode}
	}
	r := result{status: resp.StatusCode, err: fmt.Errorf("the receiver answered %s: %s", resp.Status, strings.TrimSpace(string(bytes.ToValidUTF8(snippet, nil))))}
	switch {
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		r.retryAfter = retryAfter(resp.Header.Get("Retry-After"), d.clock.Now())
	case resp.StatusCode >= 400:
		r.permanent = true
	default: // 1xx, 3xx: not followed, not delivered
	}
	return r
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return min(time.Duration(s)*time.Second, MaxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), MaxRetryAfter)
	}
	return 0
}

// newRequest makes a POST of a JSON body.
func newRequest(ctx context.Context, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Lookout-Alerts/1")
	return req, nil
}
