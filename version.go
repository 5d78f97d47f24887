package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"lookout/store"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, Go version and data-file schema version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "lookout %s (%s, %s/%s, data schema %d)\n",
				buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH, store.SchemaVersion())
			return err
		},
	}
}
