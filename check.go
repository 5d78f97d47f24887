package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"lookout/store"
)

func newCheckCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Verify the data file: bbolt page consistency and Lookout's own invariants",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := openData(g, true)
			if err != nil {
				return err
			}
			defer d.Close()
			var problems []string
			if d.store != nil {
				if problems, err = d.store.Check(); err == nil {
					var rs *store.RecordStore
					if rs, err = store.OpenRecordStore(g.dataDir); err == nil {
						var more []string
						more, err = rs.Check()
						problems = append(problems, more...)
						rs.Close()
					}
				}
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
