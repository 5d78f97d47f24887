package http

import (
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"lookout/auth"
	"lookout/store"
)

// AdminHandler serves the admin socket (<data-dir>/lookout.sock, mode 0600): while serve
// holds the data file, the CLI's admin, token, backup and check commands act through it.
// Access is the socket file's permission; there is no other authentication.
func (s *Server) AdminHandler() http.Handler {
	m := s.newMux("admin")
	m.handle(http.MethodPost, "/v1/owners", route{body: true}, s.handleAdminCreateOwner)
	m.handle(http.MethodPost, "/v1/tokens", route{body: true}, s.handleAdminCreateToken)
	m.handle(http.MethodGet, "/v1/backup", route{}, s.handleAdminBackup)
	m.handle(http.MethodGet, "/v1/warehouses", route{}, s.handleAdminWarehouses)
	m.handle(http.MethodGet, "/v1/backup/warehouses/:id", route{}, s.handleAdminBackupWarehouse)
	m.handle(http.MethodGet, "/v1/check", route{}, s.handleAdminCheck)
	m.handle(http.MethodGet, "/v1/export", route{}, s.handleAdminExport)
	return m.r
}

// OwnerRequest is the admin socket's create-owner body.
type OwnerRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name"`
}

// AdminTokenRequest is the admin socket's token body: a token request for an account named
// by e-mail address.
type AdminTokenRequest struct {
	Email string `json:"email"`
	auth.TokenRequest
}

func (s *Server) handleAdminCreateOwner(w http.ResponseWriter, r *http.Request, c *call) error {
	var in OwnerRequest
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	u, ws, err := auth.CreateOwner(s.store, in.Email, in.Password, in.Name)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, map[string]any{"user": u, "workspace": ws})
	return nil
}

func (s *Server) handleAdminCreateToken(w http.ResponseWriter, r *http.Request, c *call) error {
	var in AdminTokenRequest
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	tok, t, err := auth.CreateTokenForEmail(s.store, in.Email, in.TokenRequest)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, createdToken{ManagementToken: t, Token: tok})
	return nil
}

// backupStall is how long a backup stream may make no progress before the server drops
// it: a stalled reader holds a temporary copy's disk space, nothing more.
const backupStall = time.Minute

// streamCopy streams a consistent copy of one bbolt file with its exact length up front, so
// that a cut-off copy is detectable. The copy is first made into an unlinked temporary file
// (snapshot): the read transaction lasts as long as a local disk copy, never as long as the
// reader takes, because an open read transaction blocks every writer that must grow (remap)
// the file. Each write must make progress within backupStall.
func (s *Server) streamCopy(w http.ResponseWriter, what string, snapshot func() (*os.File, error)) error {
	f, err := snapshot()
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	rc := http.NewResponseController(w)
	// The deadline stays on the connection after this request: clear it for the next one.
	defer rc.SetWriteDeadline(time.Time{})
	n, err := io.Copy(deadlineWriter{w: w, rc: rc}, f)
	if err != nil && n == 0 {
		w.Header().Del("Content-Length")
		w.Header().Del("Content-Type")
		return err // nothing sent yet: the envelope can still say so
	}
	if err != nil {
		// The status is sent; the short body tells the client the copy failed.
		s.log.Error("backup stream failed", "file", what, "err", err, "written", n)
	}
	return nil
}

// deadlineWriter gives each write of a backup stream backupStall to make progress.
type deadlineWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(backupStall))
	return d.w.Write(p)
}

func (s *Server) handleAdminBackup(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.streamCopy(w, "lookout.db", s.store.Snapshot)
}

func (s *Server) handleAdminWarehouses(w http.ResponseWriter, r *http.Request, c *call) error {
	ids, err := s.records.Files()
	if err != nil {
		return err
	}
	if ids == nil {
		ids = []string{}
	}
	writeData(w, http.StatusOK, ids)
	return nil
}

// handleAdminBackupWarehouse streams a copy of one existing embedded warehouse file.
func (s *Server) handleAdminBackupWarehouse(w http.ResponseWriter, r *http.Request, c *call) error {
	id := c.params.ByName("id")
	ids, err := s.records.Files()
	if err != nil {
		return err
	}
	if !slices.Contains(ids, id) {
		return store.NotFound("warehouse file") // Log would create it
	}
	log, err := s.records.Log(id)
	if err != nil {
		return err
	}
	return s.streamCopy(w, id+".db", log.Snapshot)
}

func (s *Server) handleAdminCheck(w http.ResponseWriter, r *http.Request, c *call) error {
	problems, err := s.store.Check()
	if err != nil {
		return err
	}
	more, err := s.records.Check()
	if err != nil {
		return err
	}
	problems = append(problems, more...)
	files, err := s.records.Files()
	if err != nil {
		return err
	}
	if more, err = s.store.CheckWarehouseFiles(files); err != nil {
		return err
	}
	problems = append(problems, more...)
	if more, err = s.store.CheckMasterKey(nil); err != nil {
		return err
	}
	problems = append(problems, more...)
	if problems == nil {
		problems = []string{}
	}
	writeData(w, http.StatusOK, map[string]any{"problems": problems})
	return nil
}
