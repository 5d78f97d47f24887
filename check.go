package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"lookout/store"
	"lookout/warehouse"
)

func newCheckCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Verify the data dir: bbolt page consistency, Lookout's invariants, warehouse files and the master key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := openData(g, true, true)
			if err != nil {
				return err
			}
			defer d.Close()
			var problems []string
			if d.store != nil {
				problems, err = checkOffline(d.store, g)
			} else {
				var out struct {
					Problems []string `json:"problems"`
				}
				err = d.call("GET", "/v1/check", nil, &out)
				problems = out.Problems
			}
			if err != nil {
				return err
			}
			for _, p := range problems {
				fmt.Fprintln(cmd.OutOrStdout(), "problem:", p)
			}
			if len(problems) > 0 {
				return errors.New(fmt.Sprint(len(problems), " problem(s) found"))
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
}

// checkOffline checks a data dir no server holds, opening every file read-only: the
// control plane, each warehouse file on disk, that every warehouse file the control plane
// recorded is there, and that the master key (--master-key-file, LOOKOUT_MASTER_KEY or
// <data-dir>/lookout.key, never created) opens the stored key check.
func checkOffline(st *store.Store, g *globalOptions) ([]string, error) {
	problems, err := st.Check()
	if err != nil {
		return nil, err
	}
	rs, err := warehouse.OpenRecordStore(g.dataDir)
	if err != nil {
		return nil, err
	}
	files, err := rs.Files()
	rs.Close()
	if err != nil {
		return nil, err
	}
	for _, id := range files {
		l, err := warehouse.OpenReadOnlyLog(g.dataDir, id)
		if err != nil {
			problems = append(problems, fmt.Sprintf("warehouse file %s: %v", id, err))
			continue
		}
		for _, p := range l.Check() {
			problems = append(problems, fmt.Sprintf("warehouse file %s: %s", id, p))
		}
		l.Close()
	}
	more, err := st.CheckWarehouseFiles(files)
	if err != nil {
		return nil, err
	}
	problems = append(problems, more...)
	var sealer *store.Sealer
	key, err := store.ReadMasterKey(masterKeyPath(g, g.dataDir), os.Getenv("LOOKOUT_MASTER_KEY"), store.KeyOptions{InsecurePermissions: g.insecureKeyPerms})
	if err == nil && key != nil {
		sealer, err = store.NewSealer(key)
	}
	if err != nil {
		return append(problems, "master key: "+err.Error()), nil
	}
	more, err = st.CheckMasterKey(sealer)
	return append(problems, more...), err
}
