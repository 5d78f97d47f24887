package ingest

import (
	"sort"

	"lookout/store"
)

// OpenAPI describes one ingest client's POST /ingest as an OpenAPI 3.1 document, with a
// JSON Schema (2020-12, as OpenAPI 3.1 uses) for each model the client may write. Archived
// models are left out: ingest refuses them.
func OpenAPI(c store.Client, models []store.Model, ingestURL string) map[string]any {
	sort.Slice(models, func(i, j int) bool { return models[i].Key < models[j].Key })
	schemas := map[string]any{}
	var keys []string
	var refs []any
	for _, m := range models {
		if m.Status != store.StatusActive {
			continue
		}
		keys = append(keys, m.Key)
		schemas[m.Key] = modelSchema(m)
		refs = append(refs, map[string]any{"$ref": "#/components/schemas/" + m.Key})
	}
	if ingestURL == "" {
		ingestURL = "/"
	}
	if keys == nil {
		keys, refs = []string{}, []any{}
	}
	record := map[string]any{"oneOf": refs}
	schemas["IngestResult"] = map[string]any{
		"type": "object", "required": []string{"error", "data"},
		"properties": map[string]any{
			"error": map[string]any{"const": false},
			"data": map[string]any{"type": "object", "required": []string{"ingest_id", "status", "accepted", "rejected", "errors"},
				"properties": map[string]any{
					"ingest_id": map[string]any{"type": "string"},
					"status":    map[string]any{"enum": []string{"accepted", "partial"}},
					"accepted":  map[string]any{"type": "integer"},
					"rejected":  map[string]any{"type": "integer"},
					"errors":    map[string]any{"type": "array", "maxItems": MaxErrors, "items": map[string]any{"$ref": "#/components/schemas/RecordError"}},
				}},
		},
	}
	schemas["RecordError"] = map[string]any{"type": "object", "required": []string{"message"}, "properties": map[string]any{
		"line": map[string]any{"type": "integer"}, "index": map[string]any{"type": "integer"},
		"field": map[string]any{"type": "string"}, "message": map[string]any{"type": "string"},
	}}
	schemas["Error"] = map[string]any{"type": "object", "required": []string{"error", "message", "code"}, "properties": map[string]any{
		"error": map[string]any{"const": true}, "message": map[string]any{"type": "string"}, "code": map[string]any{"type": "string"},
	}}
	errResp := func(desc string) map[string]any {
		return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Lookout ingest for " + c.Name, "version": "1",
			"description": "POST records to the models this ingest client (" + c.ID + ") may write. The 202 is sent only after the records are on disk."},
		"servers":  []any{map[string]any{"url": ingestURL}},
		"security": []any{map[string]any{"apiKey": []string{}}, map[string]any{"jwt": []string{}}},
		"paths": map[string]any{
			"/ingest": map[string]any{
				"post": map[string]any{
					"operationId": "ingest",
					"summary":     "Send records for one model",
					"parameters": []any{
						map[string]any{"name": "schema", "in": "query", "required": false, "description": "the model key, when the body does not name it", "schema": map[string]any{"enum": keys}},
						map[string]any{"name": "Idempotency-Key", "in": "header", "required": false, "description": "a repeat within 24 h returns the first response and stores nothing twice", "schema": map[string]any{"type": "string", "maxLength": 255}},
					},
					"requestBody": map[string]any{"required": true, "content": map[string]any{
						"application/json": map[string]any{"schema": map[string]any{"type": "object", "required": []string{"data"}, "additionalProperties": false,
							"properties": map[string]any{"schema": map[string]any{"enum": keys}, "data": map[string]any{"type": "array", "items": record}}}},
						"application/x-ndjson": map[string]any{"schema": map[string]any{"type": "string",
							"description": "one record per line, each a record of the model or {\"data\": record, \"schema\": key}; lines up to 10 MB; Content-Encoding: gzip accepted"}},
						"application/ndjson": map[string]any{"schema": map[string]any{"type": "string", "description": "as application/x-ndjson"}},
					}},
					"responses": map[string]any{
						"202": map[string]any{"description": "accepted (all or some records); durable", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/IngestResult"}}}},
						"400": errResp("no valid record, or a malformed body"),
						"401": errResp("missing or invalid credential"),
						"403": errResp("the credential may not write here"),
						"409": errResp("the model is archived"),
						"413": errResp("the body is too large"),
						"415": errResp("unsupported Content-Type or Content-Encoding"),
						"429": errResp("quota exceeded; see Retry-After"),
						"503": errResp("busy; see Retry-After"),
					},
				},
			},
		},
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"apiKey": map[string]any{"type": "apiKey", "in": "header", "name": "Authorization", "description": "ApiKey lk_ak_…"},
				"jwt":    map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
			},
		},
	}
}

// modelSchema is the JSON Schema of a model's records.
func modelSchema(m store.Model) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, f := range m.Fields {
		s := fieldSchema(f.Type)
		if f.Description != "" {
			s["description"] = f.Description
		}
		if f.Required {
			required = append(required, f.Name)
		} else {
			s = map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
		}
		props[f.Name] = s
	}
	out := map[string]any{"type": "object", "title": m.Name, "properties": props, "required": required}
	if m.Description != "" {
		out["description"] = m.Description
	}
	if m.UnknownFields == store.UnknownReject {
		out["additionalProperties"] = false
	}
	return out
}

func fieldSchema(t string) map[string]any {
	switch t {
	case store.TypeTimestamp:
		return map[string]any{"anyOf": []any{map[string]any{"type": "string", "format": "date-time"}, map[string]any{"type": "integer", "minimum": 0}}}
	case store.TypeObject, store.TypeArray, store.TypeString, store.TypeInteger, store.TypeNumber, store.TypeBoolean:
		return map[string]any{"type": t}
	}
	return map[string]any{}
}
