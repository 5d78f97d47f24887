package store

import (
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Check verifies the data file: bbolt's own page-level consistency check, then Lookout's
// invariants (every index entry points at a record that points back, every reference
// resolves, every workspace keeps an owner). It returns every problem found; none means
// the file is sound. It runs in one read transaction, so it is safe while serving. A file
// opened read-only at an older schema version is checked as far as its buckets go.
func (s *Store) Check() ([]string, error) {
	var problems []string
	err := s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			problems = append(problems, "bbolt: "+err.Error())
		}
		if readSchemaVersion(tx) == 0 {
			problems = append(problems, "the file has no Lookout schema version: it is not a Lookout data file")
			return nil
		}
		problems = append(problems, checkInvariants(tx)...)
		return nil
	})
	return problems, err
}

func checkInvariants(tx *bolt.Tx) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	exists := func(b []byte, key string) bool { return tx.Bucket(b).Get([]byte(key)) != nil }

	// Users and their e-mail index are a bijection.
	users := 0
	_ = tx.Bucket(bucketUsers).ForEach(func(k, v []byte) error {
		users++
		var r userRecord
		if err := getJSONBytes(v, &r); err != nil {
			bad("user %s: undecodable: %v", k, err)
			return nil
		}
		if r.ID != string(k) {
			bad("user %s: stored under another id (%s)", k, r.ID)
		}
		if id := tx.Bucket(bucketUsersByEmail).Get([]byte(r.Email)); string(id) != r.ID {
			bad("user %s: e-mail index entry missing or wrong", k)
		}
		return nil
	})
	if n := tx.Bucket(bucketUsersByEmail).Stats().KeyN; n != users {
		bad("e-mail index has %d entries for %d users", n, users)
	}

	// Memberships reference live users and workspaces, and are indexed both ways.
	owners := map[string]int{}
	_ = tx.Bucket(bucketMemberships).ForEach(func(k, v []byte) error {
		var m Membership
		if err := getJSONBytes(v, &m); err != nil {
			bad("membership %q: undecodable: %v", k, err)
			return nil
		}
		if string(pairKey(m.WorkspaceID, m.UserID)) != string(k) {
			bad("membership %q: key does not match its value", k)
		}
		if !exists(bucketUsers, m.UserID) || !exists(bucketWorkspaces, m.WorkspaceID) {
			bad("membership %s/%s: user or workspace missing", m.WorkspaceID, m.UserID)
		}
		if tx.Bucket(bucketMembershipsByUser).Get(pairKey(m.UserID, m.WorkspaceID)) == nil {
			bad("membership %s/%s: by-user index entry missing", m.WorkspaceID, m.UserID)
		}
		if m.Role == RoleOwner {
			owners[m.WorkspaceID]++
		}
		return nil
	})
	_ = tx.Bucket(bucketMembershipsByUser).ForEach(func(k, _ []byte) error {
		uid, wsID := firstPart(k), pairSecond(k)
		if tx.Bucket(bucketMemberships).Get(pairKey(wsID, uid)) == nil {
			bad("by-user membership index %s/%s points at no membership", uid, wsID)
		}
		return nil
	})
	_ = tx.Bucket(bucketWorkspaces).ForEach(func(k, _ []byte) error {
		if owners[string(k)] == 0 {
			bad("workspace %s has no owner", k)
		}
		return nil
	})

	// Projects belong to live workspaces and are indexed under them.
	projects := 0
	_ = tx.Bucket(bucketProjects).ForEach(func(k, v []byte) error {
		projects++
		var p Project
		if err := getJSONBytes(v, &p); err != nil {
			bad("project %s: undecodable: %v", k, err)
			return nil
		}
		if !exists(bucketWorkspaces, p.WorkspaceID) {
			bad("project %s: workspace %s missing", k, p.WorkspaceID)
		}
		if tx.Bucket(bucketProjectsByWorkspace).Get(pairKey(p.WorkspaceID, p.ID)) == nil {
			bad("project %s: workspace index entry missing", k)
		}
		return nil
	})
	if n := tx.Bucket(bucketProjectsByWorkspace).Stats().KeyN; n != projects {
		bad("project index has %d entries for %d projects", n, projects)
	}
	_ = tx.Bucket(bucketProjectMembers).ForEach(func(k, _ []byte) error {
		if !exists(bucketProjects, firstPart(k)) || !exists(bucketUsers, pairSecond(k)) {
			bad("project member entry %q references a missing project or user", k)
		}
		return nil
	})

	// Tokens: owner exists, prefix index is exact, by-user index is exact.
	tokens := 0
	_ = tx.Bucket(bucketTokens).ForEach(func(k, v []byte) error {
		tokens++
		var r tokenRecord
		if err := getJSONBytes(v, &r); err != nil {
			bad("token %s: undecodable: %v", k, err)
			return nil
		}
		if len(r.SecretHash) != 32 {
			bad("token %s: secret hash is not a SHA-256", k)
		}
		if string(tx.Bucket(bucketTokensByPrefix).Get([]byte(r.Prefix))) != r.ID {
			bad("token %s: prefix index entry missing or wrong", k)
		}
		if tx.Bucket(bucketTokensByUser).Get(pairKey(r.UserID, r.ID)) == nil {
			bad("token %s: by-user index entry missing", k)
		}
		if !exists(bucketUsers, r.UserID) {
			bad("token %s: owner %s missing", k, r.UserID)
		}
		return nil
	})
	for _, b := range [][]byte{bucketTokensByPrefix, bucketTokensByUser} {
		if n := tx.Bucket(b).Stats().KeyN; n != tokens {
			bad("%s has %d entries for %d tokens", b, n, tokens)
		}
	}
	if hasBuckets(tx, resourceBuckets()...) { // absent before schema version 3
		out = append(out, checkResources(tx)...)
	}
	if !hasBuckets(tx, bucketSessionsByExpiry) { // absent before schema version 4
		return out
	}
	sessions := 0
	_ = tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
		sessions++
		var ses Session
		if err := getJSONBytes(v, &ses); err != nil {
			bad("session %s: undecodable: %v", k, err)
		} else if tx.Bucket(bucketSessionsByExpiry).Get(expiryKey(ses.ExpiresAt, string(k))) == nil { // an empty value is non-nil
			bad("session %s: expiry index entry missing", k)
		}
		return nil
	})
	if n := tx.Bucket(bucketSessionsByExpiry).Stats().KeyN; n != sessions {
		bad("session expiry index has %d entries for %d sessions", n, sessions)
	}
	return out
}

func firstPart(k []byte) string {
	for i, c := range k {
		if c == 0 {
			return string(k[:i])
		}
	}
	return string(k)
}

// hasBuckets reports whether every named bucket exists.
func hasBuckets(tx *bolt.Tx, names ...[]byte) bool {
	for _, n := range names {
		if tx.Bucket(n) == nil {
			return false
		}
	}
	return true
}

// resourceBuckets are the buckets checkResources reads.
func resourceBuckets() [][]byte {
	out := [][]byte{bucketByProject, bucketModelKeys, bucketAPIKeys, bucketRuntimeHashes, bucketClientCAs, bucketProjects}
	for _, k := range resourceKinds {
		out = append(out, k.bucket)
	}
	return out
}

var resourceKinds = []Kind{KindModel, KindWarehouse, KindCredential, KindIngest, KindQuery, KindRuntimeKey, KindAPI, KindBinding, KindClientCA, KindDiscovery, KindAlert, KindChannel, KindIncident, KindDelivery}

// checkResources verifies the project resources: the by_project index and each kind's
// bucket agree both ways, key indexes are exact, references resolve, and no Analytics API
// has more than one active binding.
func checkResources(tx *bolt.Tx) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	byPrefix := map[string]Kind{}
	for _, k := range resourceKinds {
		byPrefix[k.prefix] = k
	}
	idx := tx.Bucket(bucketByProject)
	_ = idx.ForEach(func(key, _ []byte) error {
		parts := strings.SplitN(string(key), "\x00", 3)
		k, ok := byPrefix[parts[0]]
		if len(parts) != 3 || !ok {
			bad("by_project entry %q is malformed", key)
			return nil
		}
		var m Meta
		if err := getJSON(tx.Bucket(k.bucket), []byte(parts[2]), k.Name, &m); err != nil {
			bad("by_project entry %q points at no %s", key, k.Name)
		} else if m.ProjectID != parts[1] {
			bad("%s %s is indexed under project %s but belongs to %s", k.Name, m.ID, parts[1], m.ProjectID)
		}
		return nil
	})
	activeBindings := map[string]int{}
	for _, k := range resourceKinds {
		_ = tx.Bucket(k.bucket).ForEach(func(id, v []byte) error {
			var r struct {
				Meta
				Key            string `json:"key"`
				KeyHash        []byte `json:"key_hash"`
				AnalyticsAPIID string `json:"analytics_api_id"`
				State          string `json:"state"`
				Authentication struct {
					MTLS *MTLSConfig `json:"mtls"`
				} `json:"authentication"`
			}
			if err := getJSONBytes(v, &r); err != nil {
				bad("%s %s: undecodable: %v", k.Name, id, err)
				return nil
			}
			if r.ID != string(id) || !strings.HasPrefix(r.ID, k.prefix) {
				bad("%s %s: stored under another id (%s)", k.Name, id, r.ID)
			}
			if tx.Bucket(bucketProjects).Get([]byte(r.ProjectID)) == nil {
				bad("%s %s: project %s missing", k.Name, id, r.ProjectID)
			}
			if idx.Get(byProjectKey(k, r.ProjectID, r.ID)) == nil {
				bad("%s %s: by_project index entry missing", k.Name, id)
			}
			switch k.prefix {
			case KindModel.prefix:
				if string(tx.Bucket(bucketModelKeys).Get(pairKey(r.ProjectID, r.Key))) != r.ID {
					bad("model %s: key index entry missing or wrong", id)
				}
			case KindAPI.prefix:
				if string(tx.Bucket(bucketAPIKeys).Get(pairKey(r.ProjectID, r.Key))) != r.ID {
					bad("Analytics API %s: key index entry missing or wrong", id)
				}
			case KindRuntimeKey.prefix:
				if string(tx.Bucket(bucketRuntimeHashes).Get(r.KeyHash)) != r.ID {
					bad("runtime key %s: hash index entry missing or wrong", id)
				}
			case KindBinding.prefix:
				if r.State == BindingActive {
					activeBindings[r.AnalyticsAPIID]++
				}
			case KindIngest.prefix, KindQuery.prefix:
				if m := r.Authentication.MTLS; m != nil {
					for _, ca := range m.ClientCAIDs {
						if tx.Bucket(bucketClientCAs).Get([]byte(ca)) == nil {
							bad("%s %s: references missing Client CA %s", k.Name, id, ca)
						}
					}
				}
			}
			return nil
		})
	}
	for api, n := range activeBindings {
		if n > 1 {
			bad("Analytics API %s has %d active bindings", api, n)
		}
	}
	for _, ix := range []struct {
		b    []byte
		kind Kind
	}{{bucketModelKeys, KindModel}, {bucketAPIKeys, KindAPI}, {bucketRuntimeHashes, KindRuntimeKey}} {
		_ = tx.Bucket(ix.b).ForEach(func(key, id []byte) error {
			if tx.Bucket(ix.kind.bucket).Get(id) == nil {
				bad("%s entry points at missing %s %s", ix.b, ix.kind.Name, id)
			}
			return nil
		})
	}
	return out
}
