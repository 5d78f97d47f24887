package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lookout/auth"
	apphttp "lookout/http"
	"lookout/store"
)

type tokenOptions struct {
	email, workspace, name, expires string
	scopes, projects                []string
}

func newTokenCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage Management Tokens offline"}
	o := &tokenOptions{}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a Management Token for an account and print it (shown this once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := auth.TokenRequest{Name: o.name, WorkspaceID: o.workspace, Scopes: splitList(o.scopes), ProjectIDs: splitList(o.projects)}
			if o.expires != "" {
				t, err := parseExpiry(o.expires)
				if err != nil {
					return err
				}
				req.ExpiresAt = &t
			}
			d, err := openData(g, true, false)
			if err != nil {
				return err
			}
			defer d.Close()
			var tok string
			if d.store != nil {
				if tok, _, err = auth.CreateTokenForEmail(d.store, o.email, req); err != nil {
					return describe(err)
				}
			} else {
				var out struct {
					Token string `json:"token"`
				}
				if err := d.call("POST", "/v1/tokens", apphttp.AdminTokenRequest{Email: o.email, TokenRequest: req}, &out); err != nil {
					return err
				}
				tok = out.Token
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&o.email, "email", "", "the owning account's e-mail address (required)")
	f.StringVar(&o.workspace, "workspace", "", "workspace id (default: the account's only workspace)")
	f.StringSliceVar(&o.scopes, "scopes", nil, "comma-separated scopes, e.g. projects:read,projects:write, or \"all\" (required)")
	f.StringSliceVar(&o.projects, "projects", nil, "comma-separated project ids the token is restricted to (default: workspace-wide)")
	f.StringVar(&o.name, "name", "cli", "token name")
	f.StringVar(&o.expires, "expires", "", "expiry: an RFC 3339 time or a duration such as 720h")
	_ = create.MarkFlagRequired("email")
	_ = create.MarkFlagRequired("scopes")
	cmd.AddCommand(create)
	return cmd
}

func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s == "all" {
			out = append(out, auth.AllScopes()...)
		} else if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseExpiry(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(d).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return t, fmt.Errorf("--expires %q: give an RFC 3339 time or a duration such as 720h", s)
	}
	return t.UTC(), nil
}

// describe adds the offending fields to a validation error for the terminal.
func describe(err error) error {
	var e *store.Error
	if errors.As(err, &e) && len(e.Fields) > 1 {
		var parts []string
		for _, f := range e.Fields {
			parts = append(parts, f.Field+" "+f.Message)
		}
		return fmt.Errorf("%s: %s", e.Message, strings.Join(parts, "; "))
	}
	return err
}
