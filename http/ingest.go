package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/coder/websocket"

	"lookout/auth"
	"lookout/ingest"
	"lookout/store"
	"lookout/warehouse/sink"
)

// registerIngestRoutes mounts the ingest runtime on its listener.
func (s *Server) registerIngestRoutes(m *mux) {
	m.handle(http.MethodOptions, "/ingest", route{}, s.handlePreflight)
	m.handle(http.MethodPost, "/ingest", route{}, s.handleIngest)
	m.handle(http.MethodGet, s.wsIngestPath, route{}, s.handleWSIngest)
	m.handle(http.MethodPost, "/discover", route{}, s.handleDiscover)
	if s.wsDiscover {
		m.handle(http.MethodGet, "/ws/discover", route{}, s.handleWSDiscover)
	}
}

// corsHeaders are the Browser rules of the spec for /ingest and /query: any origin, the
// Authorization and Content-Type headers, never credentials.
func corsHeaders(h http.Header) {
	h.Set("Access-Control-Allow-Origin", "*")
}

func (s *Server) handlePreflight(w http.ResponseWriter, r *http.Request, c *call) error {
	h := w.Header()
	corsHeaders(h)
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// runtimeRequest gathers what runtime authentication may use from a request. Cookies are
// deliberately not part of it.
func runtimeRequest(r *http.Request, kind, transport string) auth.RuntimeRequest {
	rr := auth.RuntimeRequest{Authorization: r.Header.Get("Authorization"), UserAgent: r.UserAgent(), Transport: transport, Kind: kind}
	if r.TLS != nil {
		rr.PeerCertificates = r.TLS.PeerCertificates
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		rr.RemoteAddr, _ = netip.ParseAddr(host)
	}
	return rr
}

func caller(id *auth.RuntimeIdentity) ingest.Caller {
	return ingest.Caller{ProjectID: id.Client.ProjectID, ClientID: id.Client.ID, Models: id.Models, Quota: id.Client.Quota}
}

func (s *Server) handleIngest(w http.ResponseWriter, r *http.Request, c *call) error {
	corsHeaders(w.Header())
	id, err := s.auth.AuthenticateRuntime(runtimeRequest(r, store.ClientIngest, store.TransportHTTP))
	if err != nil {
		return err
	}
	res, err := s.ingest.Ingest(r.Context(), caller(id), ingest.Request{
		ContentType: r.Header.Get("Content-Type"), ContentEncoding: r.Header.Get("Content-Encoding"),
		Body: r.Body, Schema: r.URL.Query().Get("schema"), IdempotencyKey: r.Header.Get("Idempotency-Key"),
	})
	s.countIngest(res, err)
	var replay *ingest.Replay
	if errors.As(err, &replay) {
		// A repeated Idempotency-Key is a success: the first response, marked as a replay.
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusAccepted, dataBody{Data: replay.Body})
		return nil
	}
	if err != nil {
		return ingestError(err)
	}
	writeData(w, http.StatusAccepted, res)
	return nil
}

// countIngest feeds lookout_ingest_records_total from a request's outcome.
func (s *Server) countIngest(res *ingest.Result, err error) {
	var none *ingest.NoneAccepted
	var part *ingest.Partial
	switch {
	case err == nil:
		s.metrics.ingested(res.Accepted, res.Rejected)
	case errors.As(err, &none):
		s.metrics.ingested(0, none.Result.Rejected)
	case errors.As(err, &part):
		s.metrics.ingested(part.Accepted, 0)
	}
}

// ingestError maps the ingest service's errors onto the envelope.
func ingestError(err error) error {
	var part *ingest.Partial
	if errors.As(err, &part) {
		fields := map[string]any{"ingest_id": part.IngestID, "accepted": part.Accepted}
		if part.ResumeLine != nil {
			fields["resume_line"] = *part.ResumeLine
		}
		if part.ResumeIndex != nil {
			fields["resume_index"] = *part.ResumeIndex
		}
		return withFields{err: ingestError(part.Err), fields: fields}
	}
	var none *ingest.NoneAccepted
	var quota *ingest.QuotaExceeded
	var backlog *sink.Backlogged
	switch {
	case errors.As(err, &backlog):
		return retryAfter{err: errf(store.CodeUnavailable, "%s", backlog.Error()), after: sink.BacklogRetry}
	case errors.As(err, &none):
		return withFields{err: errf(store.CodeValidation, "no valid records: nothing was stored"), fields: resultFields(none.Result)}
	case errors.As(err, &quota):
		return retryAfter{err: errf(store.CodeRateLimited, "%s", quota.Error()), after: quota.Wait}
	case errors.Is(err, ingest.ErrBusy):
		return retryAfter{err: errf(store.CodeUnavailable, "the warehouse is busy; retry shortly"), after: time.Second}
	case errors.Is(err, ingest.ErrMemory):
		return retryAfter{err: errf(store.CodeUnavailable, "the server is holding as many Idempotency-Key requests in memory as it may; retry shortly"), after: time.Second}
	case errors.Is(err, context.Canceled):
		return errf(store.CodeInvalidJSON, "the request was cancelled before it was read")
	}
	return err
}

// resultFields are an ingest result's fields, for an error envelope that carries them.
func resultFields(res ingest.Result) map[string]any {
	return map[string]any{"ingest_id": res.IngestID, "status": res.Status, "accepted": res.Accepted, "rejected": res.Rejected, "errors": res.Errors}
}

// wsMessage is one WebSocket ingest message: an ingest envelope with an optional id.
type wsMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Schema string          `json:"schema"`
	Data   json.RawMessage `json:"data"`
}

type wsReply struct {
	Type     string          `json:"type"`
	ID       json.RawMessage `json:"id,omitempty"`
	IngestID string          `json:"ingest_id,omitempty"`
	Accepted *int            `json:"accepted,omitempty"`
	Rejected *int            `json:"rejected,omitempty"`
	Errors   any             `json:"errors,omitempty"`
	Message  string          `json:"message,omitempty"`
	// ResumeIndex is set, with Accepted and IngestID, when a message failed after part of
	// it was stored: records [0, resume_index) of its data are stored, the rest are not.
	ResumeIndex *int `json:"resume_index,omitempty"`
}

// wsPingEvery keeps idle sockets alive through proxies and finds dead peers.
const wsPingEvery = 30 * time.Second

// runtimeSocket runs a runtime WebSocket: credentials are checked in the handshake and
// again before every message (a revoked key or disabled client closes the socket with
// 1008); binary frames get an error message and the socket stays open; messages are
// handled one at a time, so a slow disk slows the reader instead of growing memory;
// messages over limit close the socket (1009); the server pings every 30 s.
func (s *Server) runtimeSocket(w http.ResponseWriter, r *http.Request, limit int64, handle func(ctx context.Context, id *auth.RuntimeIdentity, msg []byte) any) error {
	rr := runtimeRequest(r, store.ClientIngest, store.TransportWS)
	id, err := s.auth.AuthenticateRuntime(rr)
	if err != nil {
		return err
	}
	sk, err := s.sockets.reserve(id.Client.ID)
	if err != nil {
		return err
	}
	defer s.sockets.release(sk)
	hw := &handshakeWriter{ResponseWriter: w}
	conn, err := websocket.Accept(hw, r, nil)
	if err != nil {
		return hw.refusal(err)
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if !sk.attach(conn, cancel) {
		conn.Close(websocket.StatusGoingAway, "server shutting down")
		return nil
	}
	conn.SetReadLimit(limit)
	go func() {
		t := time.NewTicker(wsPingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, wsPingEvery)
				err := conn.Ping(pctx)
				pcancel()
				if err != nil {
					conn.CloseNow()
					return
				}
			}
		}
	}()
	for {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			return nil // closed, too large, or a protocol violation: the library answered
		}
		if !s.socketMessage(ctx, sk, conn, rr, typ, msg, handle) {
			return nil
		}
	}
}

// socketMessage handles one message and writes its answer while holding the socket, so
// shutdown's close frame comes after an ack, never between a commit and its ack. It
// reports whether the socket stays open.
func (s *Server) socketMessage(ctx context.Context, sk *socket, conn *websocket.Conn, rr auth.RuntimeRequest, typ websocket.MessageType, msg []byte, handle func(ctx context.Context, id *auth.RuntimeIdentity, msg []byte) any) bool {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if sk.goingAway {
		return false // not handled: the client resends it after reconnecting
	}
	var out any
	if typ != websocket.MessageText {
		out = wsReply{Type: "error", Message: "binary frames are not accepted: send JSON as a text message"}
	} else if id, err := s.auth.AuthenticateRuntime(rr); err != nil {
		conn.Close(websocket.StatusPolicyViolation, "authentication lost")
		return false
	} else {
		out = handle(ctx, id, msg)
	}
	b, _ := json.Marshal(out)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	err := conn.Write(wctx, websocket.MessageText, b)
	wcancel()
	return err == nil
}

// handshakeWriter stands between websocket.Accept and the client: the 101 and the
// hijacked connection pass through, but a refusal, which the library writes as text/plain,
// is held back so refusal can answer it with the JSON envelope like every other error.
type handshakeWriter struct {
	http.ResponseWriter
	status   int    // a refusal's status, 0 while none
	message  []byte // a refusal's text, capped
	upgraded bool
}

func (h *handshakeWriter) WriteHeader(code int) {
	if code == http.StatusSwitchingProtocols {
		h.upgraded = true
		h.ResponseWriter.WriteHeader(code)
		return
	}
	if h.status == 0 {
		h.status = code
	}
}

func (h *handshakeWriter) Write(b []byte) (int, error) {
	if h.upgraded {
		return h.ResponseWriter.Write(b)
	}
	if room := 300 - len(h.message); room > 0 {
		h.message = append(h.message, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// Unwrap lets the library reach the connection's Hijacker.
func (h *handshakeWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// refusal is the envelope error for a handshake Accept refused, keeping the headers the
// library set for it (Upgrade and Connection on 426, Sec-WebSocket-Version on 400).
func (h *handshakeWriter) refusal(err error) error {
	if h.status == 0 {
		return nil // the 101 went out: the connection is the library's now
	}
	hdr := h.ResponseWriter.Header()
	hdr.Del("Content-Type")
	hdr.Del("X-Content-Type-Options")
	msg := strings.TrimSpace(string(h.message))
	switch h.status {
	case http.StatusUpgradeRequired:
		return errf(codeUpgradeRequired, "this route takes a WebSocket handshake (GET with Connection: Upgrade and Upgrade: websocket over HTTP/1.1): %s", msg)
	case http.StatusBadRequest:
		return errf(codeBadHandshake, "bad WebSocket handshake: %s", msg)
	case http.StatusForbidden:
		return errf(store.CodeForbidden, "cross-origin WebSocket handshakes are refused: the Origin header must match the host (%s)", msg)
	case http.StatusMethodNotAllowed:
		return errf(store.CodeMethodNotAllowed, "a WebSocket handshake is a GET request")
	}
	return fmt.Errorf("websocket handshake failed with %d: %w", h.status, err)
}

// handleWSIngest serves WebSocket ingest: each text message is an ingest envelope with an
// optional id, answered after the commit with an ack, or with an error message.
func (s *Server) handleWSIngest(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.runtimeSocket(w, r, ingest.MaxLine, func(ctx context.Context, id *auth.RuntimeIdentity, msg []byte) any {
		var m wsMessage
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return wsReply{Type: "error", Message: jsonError(err).Error()}
		}
		body, _ := json.Marshal(struct {
			Schema string          `json:"schema,omitempty"`
			Data   json.RawMessage `json:"data"`
		}{m.Schema, m.Data})
		res, err := s.ingest.Ingest(ctx, caller(id), ingest.Request{ContentType: "application/json", Body: bytes.NewReader(body)})
		s.countIngest(res, err)
		var none *ingest.NoneAccepted
		switch {
		case err == nil:
			out := wsReply{Type: "ack", ID: m.ID, IngestID: res.IngestID, Accepted: &res.Accepted, Rejected: &res.Rejected}
			if len(res.Errors) > 0 {
				out.Errors = res.Errors
			}
			return out
		case errors.As(err, &none):
			return wsReply{Type: "error", ID: m.ID, IngestID: none.Result.IngestID, Message: "no valid records: nothing was stored", Errors: none.Result.Errors}
		}
		out := wsReply{Type: "error", ID: m.ID, Message: safeMessage(ingestError(err))}
		var part *ingest.Partial
		if errors.As(err, &part) {
			out.IngestID, out.Accepted, out.ResumeIndex = part.IngestID, &part.Accepted, part.ResumeIndex
		}
		return out
	})
}

// safeMessage is what a caller may be told of an error.
func safeMessage(err error) string {
	var e *store.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
