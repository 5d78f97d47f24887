package auth

import "lookout/store"

// CreateTokenForEmail is CreateToken for the account with an e-mail address, as the CLI's
// `token create` asks for it, offline and through the admin socket alike (one function,
// so both give the same defaults): an empty WorkspaceID means the account's only
// workspace. It returns not_found for an unknown address, validation_failed when the
// account has no single workspace to default to, and CreateToken's errors.
func CreateTokenForEmail(st *store.Store, email string, req TokenRequest) (string, store.ManagementToken, error) {
	u, err := st.UserByEmail(email)
	if err != nil {
		if store.IsCode(err, store.CodeNotFound) {
			err = store.Errorf(store.CodeNotFound, "no account with e-mail address %q", email)
		}
		return "", store.ManagementToken{}, err
	}
	if req.WorkspaceID == "" {
		wss, err := st.WorkspacesOf(u.ID)
		if err != nil {
			return "", store.ManagementToken{}, err
		}
		if len(wss) != 1 {
			return "", store.ManagementToken{}, store.Errorf(store.CodeValidation, "the account belongs to %d workspaces: choose one with --workspace", len(wss))
		}
		req.WorkspaceID = wss[0].ID
	}
	return CreateToken(st, u.ID, req)
}
