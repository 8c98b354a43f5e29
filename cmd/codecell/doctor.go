package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/codecell/codecell/internal/doctor"
)

func doctorCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("doctor", flag.ExitOnError)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print the checks as JSON")
	fs.Parse(args)

	// A configuration error is itself reported by the checks below.
	cfg, _ := c.sandboxConfig(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	checks := doctor.Run(ctx, cfg)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(checks)
	} else {
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		for _, ch := range checks {
			state := "active"
			if !ch.OK {
				state = "MISSING"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", state, ch.Layer, ch.Detail)
			if ch.Fix != "" {
				fmt.Fprintf(w, "\t\tfix: %s\n", ch.Fix)
			}
		}
		w.Flush()
	}
	for _, ch := range checks {
		if !ch.OK {
			return exitError(1)
		}
	}
	return nil
}
