package store

import (
	"encoding/json"

	bolt "go.etcd.io/bbolt"
)

// Channel is a notification channel as the store keeps it: its public configuration as
// JSON and its secrets (signing secrets, header values, a Slack URL, an SMTP password) in
// a map sealed with the master key, the channel id as additional data. What the type's
// configuration means, and how secrets are masked on read, is the alerts package's
// business (one file per channel type): the store only keeps secrets out of plain sight.
type Channel struct {
	Meta
	Name    string            `json:"name"`
	Type    string            `json:"type"`
	Enabled bool              `json:"enabled"`
	Public  json.RawMessage   `json:"-"`
	Secrets map[string]string `json:"-"`
}

type channelRecord struct {
	Meta
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Enabled bool            `json:"enabled"`
	Public  json.RawMessage `json:"public"`
	Sealed  []byte          `json:"sealed_secrets,omitempty"`
}

func (s *Store) toRecord(c *Channel) (channelRecord, error) {
	r := channelRecord{Meta: c.Meta, Name: c.Name, Type: c.Type, Enabled: c.Enabled, Public: c.Public}
	if len(c.Secrets) > 0 {
		raw, err := json.Marshal(c.Secrets)
		if err != nil {
			return r, err
		}
		if r.Sealed, err = s.seal(c.ID, string(raw)); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (s *Store) fromRecord(r channelRecord) (Channel, error) {
	c := Channel{Meta: r.Meta, Name: r.Name, Type: r.Type, Enabled: r.Enabled, Public: r.Public, Secrets: map[string]string{}}
	if len(r.Sealed) > 0 {
		if s.sealer == nil {
			return c, Errorf(CodeInternal, "no master key loaded")
		}
		raw, err := s.sealer.Unseal(r.Sealed, []byte(r.ID))
		if err != nil {
			return c, Errorf(CodeInternal, "the channel's secrets cannot be opened with this master key")
		}
		if err := json.Unmarshal(raw, &c.Secrets); err != nil {
			return c, err
		}
	}
	return c, nil
}

// CreateChannel stores a channel the caller has validated. Returns not_found (project).
func (s *Store) CreateChannel(c Channel) (Channel, error) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketProjects).Get([]byte(c.ProjectID)) == nil {
			return NotFound("project")
		}
		c.ID = s.newID(KindChannel.prefix)
		r, err := s.toRecord(&c)
		if err != nil {
			return err
		}
		if err := s.insertRes(tx, KindChannel, &r, s.now()); err != nil {
			return err
		}
		c.Meta = r.Meta
		return nil
	})
	return c, err
}

// Channel reads a channel with its secrets opened. Returns not_found.
func (s *Store) Channel(projectID, id string) (Channel, error) {
	var c Channel
	err := s.db.View(func(tx *bolt.Tx) error {
		r, err := getInProject[channelRecord](tx, KindChannel, projectID, id)
		if err != nil {
			return err
		}
		c, err = s.fromRecord(r)
		return err
	})
	return c, err
}

// ListChannels lists a project's channels in creation order, secrets opened.
func (s *Store) ListChannels(projectID string, p Page) ([]Channel, string, error) {
	var out []Channel
	var next string
	err := s.db.View(func(tx *bolt.Tx) error {
		recs, n, err := listRes[channelRecord](tx, KindChannel, projectID, p, nil)
		if err != nil {
			return err
		}
		next = n
		for _, r := range recs {
			c, err := s.fromRecord(r)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	return out, next, err
}

// UpdateChannel reads a channel, lets change replace its fields (and validate them), and
// stores it with its secrets sealed again. Returns not_found, precondition_failed, and
// change's errors.
func (s *Store) UpdateChannel(projectID, id string, ifMatch int, change func(c *Channel) error) (Channel, error) {
	var c Channel
	rec, err := updateRes(s, KindChannel, projectID, id, ifMatch, func(tx *bolt.Tx, r *channelRecord) error {
		var err error
		if c, err = s.fromRecord(*r); err != nil {
			return err
		}
		if err := change(&c); err != nil {
			return err
		}
		c.Meta = r.Meta
		nr, err := s.toRecord(&c)
		if err != nil {
			return err
		}
		*r = nr
		return nil
	})
	c.Meta = rec.Meta // the version and time the write gave it
	return c, err
}
