package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"lookout/auth"
	apphttp "lookout/http"
	"lookout/store"
)

type createOwnerOptions struct {
	email, name   string
	passwordStdin bool
}

func newAdminCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "admin", Short: "Administer accounts offline (or through a running server's admin socket)"}
	o := &createOwnerOptions{}
	create := &cobra.Command{
		Use:   "create-owner",
		Short: "Create an owner account with its own workspace",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !o.passwordStdin {
				return errors.New("--password-stdin is required: pass the password on standard input, never on the command line")
			}
			pw, err := readPassword(cmd.InOrStdin())
			if err != nil {
				return err
			}
			d, err := openData(g, false, false)
			if err != nil {
				return err
			}
			defer d.Close()
			var out struct {
				User      store.User      `json:"user"`
				Workspace store.Workspace `json:"workspace"`
			}
			if d.store != nil {
				out.User, out.Workspace, err = auth.CreateOwner(d.store, o.email, pw, o.name)
			} else {
				err = d.call("POST", "/v1/owners", apphttp.OwnerRequest{Email: o.email, Password: pw, Name: o.name}, &out)
			}
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{
				"user_id": out.User.ID, "email": out.User.Email, "workspace_id": out.Workspace.ID,
			})
		},
	}
	create.Flags().StringVar(&o.email, "email", "", "the owner's e-mail address (required)")
	create.Flags().StringVar(&o.name, "name", "", "display name")
	create.Flags().BoolVar(&o.passwordStdin, "password-stdin", false, "read the password from standard input")
	_ = create.MarkFlagRequired("email")
	cmd.AddCommand(create)
	return cmd
}

// readPassword reads the first line of r.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", err
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", errors.New("no password on standard input")
	}
	return pw, nil
}
