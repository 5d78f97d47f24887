package http

import (
	"lookout/store"

	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// Body read deadlines. The console, Management and query listeners take small JSON bodies
// (2 MiB at most): the whole body must arrive within one deadline (--body-read-timeout).
// The ingest listener takes streams of up to gigabytes, so a fixed deadline would cut off a
// legitimate upload: there each read must bring bytes within --ingest-read-idle-timeout,
// and the time spent waiting on the client may not exceed that idle time plus one second
// per --ingest-min-rate bytes received, so a trickle of one byte per idle period cannot
// hold a connection forever either. Deadlines are set per request through
// http.ResponseController rather than http.Server.ReadTimeout, whose deadline also covers
// the server's background read after the body, where it would cancel the context of a
// handler still working (a commit waiting for the disk) once it passes.

// Defaults of the body read limits (Config fields left zero).
const (
	DefaultBodyReadTimeout = 60 * time.Second
	DefaultIngestReadIdle  = 30 * time.Second
	DefaultIngestMinRate   = 1024 // bytes per second
)

// errBodyStalled ends an ingest body whose client stopped sending (or sends too slowly).
// Its message reaches the client, so it names the cause and nothing of the connection.
var errBodyStalled = store.Errorf(codeRequestTimeout, "the request body stalled: the client sent nothing within the read idle timeout, or less than the minimum rate; resend from resume_line")

// hasBody reports whether a request carries a body that the server would read.
func hasBody(r *http.Request) bool { return r.Body != nil && r.Body != http.NoBody }

// setReadDeadline moves the connection's read deadline; the zero time clears it. Writers
// that cannot (HTTP/2 streams in tests, recorders) are left alone.
func setReadDeadline(w http.ResponseWriter, t time.Time) {
	_ = http.NewResponseController(w).SetReadDeadline(t)
}

// isReadTimeout reports whether a body read failed on its deadline.
func isReadTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// idleBody is an ingest request body under the idle and minimum-rate rules above.
type idleBody struct {
	io.ReadCloser
	rc      *http.ResponseController // made once per request, not per read
	idle    time.Duration
	minRate int64 // bytes per second; 0 disables the rate rule
	n       int64 // bytes received
	waited  time.Duration
	done    bool
}

// setDeadline moves the connection's read deadline (nil rc: nothing to move, in tests).
func (b *idleBody) setDeadline(t time.Time) {
	if b.rc != nil {
		_ = b.rc.SetReadDeadline(t)
	}
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	allow := b.idle
	if b.minRate > 0 {
		budget := b.idle + time.Duration(b.n)*time.Second/time.Duration(b.minRate) - b.waited
		allow = min(allow, budget)
	}
	if allow <= 0 {
		return 0, errBodyStalled
	}
	start := time.Now()
	b.setDeadline(start.Add(allow))
	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(start)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		// The whole body is in: the server's background read starts now and must not
		// inherit a deadline that would cancel the handler's context while it commits.
		b.done = true
		b.setDeadline(time.Time{})
	case err != nil && isReadTimeout(err):
		return n, errBodyStalled
	}
	return n, err
}
