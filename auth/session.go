package auth

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// SessionTTL is how long a console sign-in lasts.
const SessionTTL = 12 * time.Hour

// sessionClaims is the session JWT: the user and the server-side session it belongs to.
type sessionClaims struct {
	SessionID string `json:"sid"`
	jwt.RegisteredClaims
}

// sessionSigner signs and verifies console session JWTs (HS256). Its key is derived from
// the master key, so it survives restarts without being stored.
type sessionSigner struct {
	key []byte
	now func() time.Time
}

const sessionIssuer = "lookout"

func (s sessionSigner) sign(sid, userID string, expires time.Time) (string, error) {
	c := sessionClaims{SessionID: sid, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: sessionIssuer, Subject: userID, ExpiresAt: jwt.NewNumericDate(expires),
		IssuedAt: jwt.NewNumericDate(s.now()),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.key)
}

var errBadSession = errors.New("bad session token")

// verify returns the session id and user id of a valid, unexpired session JWT.
func (s sessionSigner) verify(tok string) (sid, userID string, err error) {
	var c sessionClaims
	_, err = jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return s.key, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer(sessionIssuer),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(s.now))
	if err != nil || c.SessionID == "" || c.Subject == "" {
		return "", "", errBadSession
	}
	return c.SessionID, c.Subject, nil
}
