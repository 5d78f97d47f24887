package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"lookout/store"
)

// Channel types.
const (
	ChannelWebhook = "webhook"
	ChannelSlack   = "slack"
	ChannelEmail   = "email"
)

// channelType is one kind of notification channel (one file each): how its configuration
// is checked, which parts are secret, and how it reads back masked.
type channelType interface {
	// parse checks a configuration and splits it into its public part and its secrets.
	// old holds the stored secrets: a secret sent back as its masked form keeps the old
	// value. generated is a secret made for the caller, to be shown once.
	parse(raw json.RawMessage, old map[string]string) (public any, secrets map[string]string, generated string, errs []store.FieldError)
	// view merges the public part with the masked secrets, as reads show the config.
	view(public json.RawMessage, secrets map[string]string) (map[string]any, error)
	// send delivers one notice through the channel and says how it went.
	send(ctx context.Context, d *Dispatcher, ch *store.Channel, n *Notice) result
}

var (
	_ channelType = webhook{}
	_ channelType = slack{}
	_ channelType = email{}
)

var channelTypes = map[string]channelType{ChannelWebhook: webhook{}, ChannelSlack: slack{}, ChannelEmail: email{}}

// ChannelTypes lists the channel types, sorted.
func ChannelTypes() []string {
	out := make([]string, 0, len(channelTypes))
	for t := range channelTypes {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// mask shows the last four characters of a long secret, nothing of a short one.
func mask(secret string) string {
	r := []rune(secret)
	if len(r) < 12 {
		return "****"
	}
	return "****" + string(r[len(r)-4:])
}

// keep returns the stored secret when v is its masked form (a PUT that sends back what it
// read), else v.
func keep(v string, old map[string]string, key string) string {
	if o, ok := old[key]; ok && v == mask(o) {
		return o
	}
	return v
}

// decodeStrict decodes a configuration object, refusing unknown fields.
func decodeStrict(raw json.RawMessage, v any) []store.FieldError {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return []store.FieldError{{Field: "config", Message: "is required"}}
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return []store.FieldError{{Field: "config." + strings.Trim(f, `"`), Message: "is not a setting of this channel type"}}
		}
		return []store.FieldError{{Field: "config", Message: "must be an object with this channel type's settings"}}
	}
	return nil
}

// checkURL checks an http(s) URL for a receiver.
func checkURL(field, raw string) []store.FieldError {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(raw) > 2048 {
		return []store.FieldError{{Field: field, Message: "must be an absolute http or https URL of at most 2048 bytes"}}
	}
	if u.User != nil {
		return []store.FieldError{{Field: field, Message: "must not carry a user or password: use headers"}}
	}
	return nil
}

// ChannelInput is a channel's writable fields.
type ChannelInput struct {
	ProjectID *string         `json:"project_id"`
	Name      *string         `json:"name"`
	Type      *string         `json:"type"`
	Enabled   *bool           `json:"enabled"`
	Config    json.RawMessage `json:"config"`
}

// ChannelView is a channel as reads show it: secrets masked.
type ChannelView struct {
	store.Meta
	Name    string         `json:"name"`
	Type    string         `json:"type"`
	Enabled bool           `json:"enabled"`
	Config  map[string]any `json:"config"`
}

// CreatedChannel is the create response: the view, and a signing secret made for the
// caller, shown this once.
type CreatedChannel struct {
	ChannelView
	SigningSecret string `json:"signing_secret,omitempty"`
}

func viewOf(c store.Channel) (ChannelView, error) {
	t, ok := channelTypes[c.Type]
	if !ok {
		return ChannelView{}, fmt.Errorf("channel %s has unknown type %q", c.ID, c.Type)
	}
	cfg, err := t.view(c.Public, c.Secrets)
	return ChannelView{Meta: c.Meta, Name: c.Name, Type: c.Type, Enabled: c.Enabled, Config: cfg}, err
}

// apply checks in against c (a new channel when c.ID is empty) and writes it into c.
func apply(c *store.Channel, in ChannelInput, creating bool) (string, error) {
	var f []store.FieldError
	if in.Name != nil {
		c.Name = strings.TrimSpace(*in.Name)
	}
	if n := utf8.RuneCountInString(c.Name); n == 0 || n > 200 {
		f = append(f, store.FieldError{Field: "name", Message: "must be 1 to 200 characters"})
	}
	if in.Type != nil {
		if !creating && *in.Type != c.Type {
			return "", store.Errorf(store.CodeConflict, "a channel's type cannot change: create a new channel")
		}
		c.Type = *in.Type
	}
	if in.Enabled != nil {
		c.Enabled = *in.Enabled
	}
	t, ok := channelTypes[c.Type]
	if !ok {
		f = append(f, store.FieldError{Field: "type", Message: "must be one of " + strings.Join(ChannelTypes(), ", ")})
		return "", store.Invalid(f...)
	}
	if in.Config == nil && !creating {
		return "", store.Invalid(append(f, store.FieldError{Field: "config", Message: "is required: send the config as read (masked secrets are kept)"})...)
	}
	public, secrets, generated, errs := t.parse(in.Config, c.Secrets)
	if f = append(f, errs...); len(f) > 0 {
		return "", store.Invalid(f...)
	}
	raw, err := json.Marshal(public)
	if err != nil {
		return "", err
	}
	c.Public, c.Secrets = raw, secrets
	return generated, nil
}

// CreateChannel validates and stores a channel. Returns validation_failed, not_found.
func (s *Service) CreateChannel(projectID string, in ChannelInput) (CreatedChannel, error) {
	c := store.Channel{Meta: store.Meta{ProjectID: projectID}, Enabled: true, Secrets: map[string]string{}}
	if in.Type == nil {
		return CreatedChannel{}, store.Invalid(store.FieldError{Field: "type", Message: "is required: one of " + strings.Join(ChannelTypes(), ", ")})
	}
	generated, err := apply(&c, in, true)
	if err != nil {
		return CreatedChannel{}, err
	}
	if c, err = s.Store.CreateChannel(c); err != nil {
		return CreatedChannel{}, err
	}
	v, err := viewOf(c)
	return CreatedChannel{ChannelView: v, SigningSecret: generated}, err
}

// UpdateChannel replaces a channel's writable fields. Returns validation_failed, not_found,
// conflict (type change), precondition_failed.
func (s *Service) UpdateChannel(projectID, id string, in ChannelInput, ifMatch int) (ChannelView, error) {
	c, err := s.Store.UpdateChannel(projectID, id, ifMatch, func(c *store.Channel) error {
		_, err := apply(c, in, false)
		return err
	})
	if err != nil {
		return ChannelView{}, err
	}
	return viewOf(c)
}

// SetChannelEnabled turns a channel on or off. Returns not_found.
func (s *Service) SetChannelEnabled(projectID, id string, enabled bool) (ChannelView, error) {
	c, err := s.Store.UpdateChannel(projectID, id, 0, func(c *store.Channel) error {
		c.Enabled = enabled
		return nil
	})
	if err != nil {
		return ChannelView{}, err
	}
	if enabled {
		s.disp.release(id) // deliveries it held go now
	}
	return viewOf(c)
}

// Channel reads a channel, masked. Returns not_found.
func (s *Service) Channel(projectID, id string) (ChannelView, error) {
	c, err := s.Store.Channel(projectID, id)
	if err != nil {
		return ChannelView{}, err
	}
	return viewOf(c)
}

// ListChannels lists a project's channels, masked.
func (s *Service) ListChannels(projectID string, p store.Page) ([]ChannelView, string, error) {
	cs, next, err := s.Store.ListChannels(projectID, p)
	if err != nil {
		return nil, "", err
	}
	out := make([]ChannelView, 0, len(cs))
	for _, c := range cs {
		v, err := viewOf(c)
		if err != nil {
			return nil, "", err
		}
		out = append(out, v)
	}
	return out, next, nil
}
