package alerts

import (
	"encoding/json"

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
