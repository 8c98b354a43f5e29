package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/codecell/codecell/internal/bench"
	"github.com/codecell/codecell/internal/kernel"
)

func benchCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print the rows as JSON")
	cells := fs.Int("cells", 300, "session cells timed")
	newSessions := fs.Int("new-sessions", 10, "new sessions timed")
	oneShots := fs.Int("one-shots", 30, "one-shot runs timed")
	sessions := fs.Int("sessions", 50, "live sessions for the memory scenario (the target is measured at 200)")
	dur := fs.Duration("throughput", 10*time.Second, "how long one-shot runs are sustained (the target is 30s)")
	prewarm := fs.Int("prewarm", 1, "warm kernels per language in the sandbox under test")
	density := fs.Int("density", 1000, "live sessions for the density scenario; 0 skips it")
	perSandbox := fs.Int("density-per-sandbox", 100, "sessions per sandbox in the density scenario")
	fs.Parse(args)

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := c.sandboxConfig(log)
	if err != nil {
		return err
	}
	// One sandbox holds the memory scenario's sessions, or the density
	// scenario's share: its limits must not be what is measured.
	perBox := int64(max(*sessions, *perSandbox))
	cfg.Limits.MemoryBytes = max(cfg.Limits.MemoryBytes, perBox*150<<20)
	cfg.Limits.Pids = max(cfg.Limits.Pids, perBox*10+100)
	cfg.Prewarm = map[kernel.Language]int{kernel.Python: *prewarm, kernel.JavaScript: *prewarm}
	rows, err := bench.Run(ctx, bench.Config{Sandbox: cfg, Cells: *cells, NewSessions: *newSessions, OneShots: *oneShots,
		Sessions: *sessions, Throughput: *dur, Density: *density, DensityPerSandbox: *perSandbox, Logger: log})
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rows)
	} else {
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "scenario\tmetric\tvalue\tbaseline\tratio\ttarget\tmet")
		for _, r := range rows {
			base, ratio, ok := "", "", ""
			if r.Baseline != 0 {
				base = fmt.Sprintf("%.2f %s (%s)", r.Baseline, r.Unit, r.BaselineName)
				ratio = fmt.Sprintf("%.3f", r.Ratio())
			}
			if r.Met != nil {
				ok = map[bool]string{true: "yes", false: "no"}[*r.Met]
			}
			fmt.Fprintf(w, "%s\t%s\t%.2f %s\t%s\t%s\t%s\t%s\n", r.Scenario, r.Metric, r.Value, r.Unit, base, ratio, r.Target, ok)
			if r.Note != "" {
				fmt.Fprintf(w, "\t  %s\n", r.Note)
			}
		}
		w.Flush()
	}
	return err
}
