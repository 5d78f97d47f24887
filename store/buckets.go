package store

import (
	"encoding/binary"
	"time"
)

// Every bucket name and key encoding lives here. Names carry a version suffix: a change of a
// value's encoding gets a new bucket and a migration (migrate.go), never an in-place rewrite
// that an older binary would misread.
//
// Keys are byte strings that sort in the order lists are served: ids are ULIDs (time-ordered),
// composite keys join their parts with a 0 byte, which sorts below every id character.
var (
	bucketMeta = []byte("meta") // schemaVersionKey -> big-endian uint64; keyCheckKey -> sealed keyCheckValue

	// Embedded warehouses whose file has been created: made by the first entry (no
	// migration), so an absent bucket means no file was ever recorded. Check expects a file
	// for every entry; a warehouse without an entry never received a record.
	bucketWarehouseFiles = []byte("warehouse_files.v1") // warehouse id -> RFC 3339 time first seen

	bucketUsers        = []byte("users.v1")          // user id -> userRecord JSON
	bucketUsersByEmail = []byte("users_by_email.v1") // lower-case email -> user id

	bucketWorkspaces        = []byte("workspaces.v1")          // workspace id -> Workspace JSON
	bucketMemberships       = []byte("memberships.v1")         // ws id 0 user id -> Membership JSON
	bucketMembershipsByUser = []byte("memberships_by_user.v1") // user id 0 ws id -> nil

	bucketProjects            = []byte("projects.v1")              // project id -> Project JSON
	bucketProjectsByWorkspace = []byte("projects_by_workspace.v1") // ws id 0 project id -> nil
	bucketProjectMembers      = []byte("project_members.v1")       // project id 0 user id -> nil

	bucketTokens         = []byte("mgmt_tokens.v1")           // token id -> tokenRecord JSON
	bucketTokensByPrefix = []byte("mgmt_tokens_by_prefix.v1") // token prefix -> token id
	bucketTokensByUser   = []byte("mgmt_tokens_by_user.v1")   // user id 0 token id -> nil

	bucketSessions         = []byte("sessions.v1")           // session id -> Session JSON
	bucketSessionsByExpiry = []byte("sessions_by_expiry.v1") // expiryKey(expires_at, session id) -> nil

	// Project resources: one bucket per kind (id -> record JSON) and one shared index that
	// lists each project's resources of a kind in creation order.
	bucketByProject     = []byte("by_project.v1")            // kind prefix 0 project id 0 id -> nil
	bucketModels        = []byte("models.v1")                // model id -> Model JSON
	bucketModelKeys     = []byte("model_keys.v1")            // project id 0 model key -> model id
	bucketWarehouses    = []byte("warehouses.v1")            // warehouse id -> Warehouse JSON
	bucketCredentials   = []byte("warehouse_credentials.v1") // credential id -> credentialRecord JSON
	bucketIngestClients = []byte("ingest_clients.v1")        // client id -> clientRecord JSON
	bucketQueryClients  = []byte("query_clients.v1")         // client id -> clientRecord JSON
	bucketRuntimeKeys   = []byte("runtime_keys.v1")          // key id -> runtimeKeyRecord JSON
	bucketRuntimeHashes = []byte("runtime_keys_by_hash.v1")  // SHA-256 of the whole key -> key id
	bucketAnalyticsAPIs = []byte("analytics_apis.v1")        // api id -> AnalyticsAPI JSON
	bucketAPIKeys       = []byte("analytics_api_keys.v1")    // project id 0 api key -> api id
	bucketBindings      = []byte("analytics_bindings.v1")    // binding id -> Binding JSON
	bucketClientCAs     = []byte("client_cas.v1")            // CA id -> ClientCA JSON
	bucketDiscovery     = []byte("discovery_sessions.v1")    // session id -> discoveryRecord JSON

	// Alerts (CONTRACTS §6).
	bucketAlerts      = []byte("alerts.v1")                // alert id -> Alert JSON
	bucketChannels    = []byte("notification_channels.v1") // channel id -> channelRecord JSON (secrets sealed)
	bucketSimulations = []byte("alert_simulations.v1")     // simulation id -> Simulation JSON; kept an hour

	// Incidents and the delivery queue (CONTRACTS §6).
	bucketIncidents       = []byte("alert_incidents.v1")              // incident id -> Incident JSON
	bucketIncidentsOpen   = []byte("alert_incidents_open.v1")         // alert id 0 group JSON -> incident id, while open or acknowledged
	bucketOccurrences     = []byte("alert_occurrences.v1")            // incident id -> JSON array of its latest OccurrencesKept occurrences, oldest first
	bucketDeliveries      = []byte("alert_deliveries.v1")             // delivery id -> Delivery JSON
	bucketDeliveryQueue   = []byte("alert_delivery_queue.v1")         // delivery id -> nil, while pending, delivering or failed
	bucketDeliveriesByInc = []byte("alert_deliveries_by_incident.v1") // incident id 0 delivery id -> nil
	bucketDeliveryMerge   = []byte("alert_delivery_merge.v1")         // incident id 0 channel id -> id of the unsent delivery new occurrences merge into
)

var (
	schemaVersionKey = []byte("schema_version")
	keyCheckKey      = []byte("master_key_check")
)

// pairKey joins two key parts with a 0 byte.
func pairKey(a, b string) []byte {
	k := make([]byte, 0, len(a)+1+len(b))
	k = append(k, a...)
	k = append(k, 0)
	return append(k, b...)
}

// pairPrefix is the key prefix of every pairKey(a, …).
func pairPrefix(a string) []byte { return pairKey(a, "") }

// pairSecond returns the part after the 0 byte of a pairKey.
func pairSecond(k []byte) string {
	for i, c := range k {
		if c == 0 {
			return string(k[i+1:])
		}
	}
	return ""
}

// expiryKey orders entries by an instant, then id: 8 bytes of big-endian Unix seconds (the
// store keeps whole seconds; instants before 1970 do not occur) followed by the id, so a
// cursor from First() meets the earliest expiry first and can stop at the first one still
// in the future.
func expiryKey(at time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(max(at.Unix(), 0)))
	return append(k, id...)
}

// expiryKeyTime returns the instant an expiryKey starts with.
func expiryKeyTime(k []byte) time.Time {
	if len(k) < 8 {
		return time.Time{}
	}
	return time.Unix(int64(binary.BigEndian.Uint64(k[:8])), 0).UTC()
}

// Discovery keeps each session's preview samples and the waiting session of each client
// beside the session record, so a capture rewrites only a record bounded by the caps
// (discovery.go) and finds the waiting session without reading every session.
var (
	bucketDiscoveryPreviews = []byte("discovery_previews.v1") // previewKey(session id, seq) -> sample JSON
	bucketDiscoveryWaiting  = []byte("discovery_waiting.v1")  // ingest client id -> waiting session id
)

// previewKey orders a session's preview samples by arrival: the session id, a 0 byte, then
// the sequence number as 8 big-endian bytes.
func previewKey(sessionID string, seq uint64) []byte {
	k := pairKey(sessionID, "")
	return binary.BigEndian.AppendUint64(k, seq)
}
