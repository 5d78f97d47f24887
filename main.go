// Command lookout is the Lookout appliance: one binary that serves the console and
// Management API, the ingest and query runtimes and alerting from one bbolt data file.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "lookout:", err)
		os.Exit(1)
	}
}

// globalOptions are the flags every command shares.
type globalOptions struct {
	dataDir       string
	masterKeyFile string
	// insecureKeyPerms accepts a master key file open to the group or other accounts.
	insecureKeyPerms bool
}

func newRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:           "lookout",
		Short:         "Lookout: a self-hosted reporting and alerting appliance in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return applyEnv(cmd)
		},
	}
	root.PersistentFlags().StringVar(&g.dataDir, "data-dir", "./lookout-data", "directory holding lookout.db, lookout.key and lookout.sock")
	root.PersistentFlags().StringVar(&g.masterKeyFile, "master-key-file", "", "master key file (default <data-dir>/lookout.key; LOOKOUT_MASTER_KEY gives the key itself)")
	root.PersistentFlags().BoolVar(&g.insecureKeyPerms, "insecure-key-permissions", false, "accept a master key file that the group or other accounts may read (for file systems without Unix modes)")
	root.AddCommand(newServeCommand(g), newAdminCommand(g), newTokenCommand(g), newBackupCommand(g), newExportCommand(g),
		newCheckCommand(g), newVersionCommand(), newBenchCommand())
	return root
}

// applyEnv fills every flag the command line left unset from LOOKOUT_<FLAG_NAME>, so that
// --ingest-addr can also come from LOOKOUT_INGEST_ADDR. The command line wins.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := envName(f.Name)
		if v, ok := os.LookupEnv(name); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	return err
}

// envName is the environment variable of a flag: --ingest-addr is LOOKOUT_INGEST_ADDR.
func envName(flag string) string {
	return "LOOKOUT_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}
