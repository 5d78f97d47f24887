package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"lookout/store"
)

// slack posts a Slack-compatible incoming-webhook payload (text and blocks), which
// Mattermost and Rocket.Chat accept as well. The URL is the secret: whoever has it can post.
type slack struct{}

type slackConfig struct {
	URL string `json:"url"`
}

func (slack) parse(raw json.RawMessage, old map[string]string) (any, map[string]string, string, []store.FieldError) {
	var c slackConfig
	if errs := decodeStrict(raw, &c); errs != nil {
		return nil, nil, "", errs
	}
	u := keep(c.URL, old, "url")
	return map[string]any{}, map[string]string{"url": u}, "", checkURL("config.url", u)
}

func (slack) view(_ json.RawMessage, secrets map[string]string) (map[string]any, error) {
	return map[string]any{"url": mask(secrets["url"])}, nil
}

// slackBody is a Slack incoming-webhook message: text for notifications and clients
// without blocks, and blocks (header, the facts, a context line) for the rest.
func slackBody(n *Notice) []byte {
	text := n.text()
	blocks := []any{
		map[string]any{"type": "header", "text": map[string]any{"type": "plain_text", "text": cutRunes(n.title(), 150)}},
		map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": cutRunes(slackEscape(text), 3000)}},
		map[string]any{"type": "context", "elements": []any{map[string]any{"type": "mrkdwn",
			"text": slackEscape(fmt.Sprintf("Lookout · %s · delivery %s", n.Type, n.DeliveryID))}}},
	}
	b, _ := json.Marshal(map[string]any{"text": text, "blocks": blocks})
	return b
}

// slackEscape escapes the three characters Slack's mrkdwn gives meaning to.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func (slack) send(ctx context.Context, d *Dispatcher, ch *store.Channel, n *Notice) result {
	req, err := newRequest(ctx, ch.Secrets["url"], slackBody(n))
	if err != nil {
		return result{err: err, permanent: true}
	}
	return d.post(req)
}
