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

	"github.com/codecell/codecell/internal/doctor"
)

func doctorCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("doctor", flag.ExitOnError)
	var c common
	c.register(fs)
	var rf remoteFlags
	rf.register(fs)
	asJSON := fs.Bool("json", false, "print the checks as JSON")
	fs.Parse(args)

	// A configuration error is itself reported by the checks below.
	cfg, _ := c.sandboxConfig(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	checks := doctor.Run(ctx, cfg)
	if rf.server != "" {
		checks = append(checks, serverChecks(ctx, rf)...)
	}
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

// serverChecks reports a running server (--server) and the live resource
// use of each of its sandboxes.
func serverChecks(ctx context.Context, rf remoteFlags) []doctor.Check {
	fail := func(err error) []doctor.Check {
		return []doctor.Check{{Layer: "server", Detail: fmt.Sprintf("%s: %v", rf.server, err),
			Fix: "start it with `codecell serve`, or give the right --server and --api-key"}}
	}
	c, err := rf.client()
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := c.Health(ctx)
	if err != nil {
		return fail(err)
	}
	list, err := c.ListSandboxes(ctx, nil)
	if err != nil {
		return fail(err)
	}
	checks := []doctor.Check{{Layer: "server", OK: true,
		Detail: fmt.Sprintf("%s: version %s, %d sandboxes", rf.server, h.Version, len(list))}}
	for _, sb := range list {
		u := sb.Usage
		sessions := 0
		for _, n := range sb.Sessions {
			sessions += n
		}
		checks = append(checks, doctor.Check{Layer: "sandbox " + sb.ID, OK: true, Detail: fmt.Sprintf(
			"memory %s of %s, %d processes, disk %s of %s, %d sessions, %d executions using %.1f s of CPU, %d OOM kills, %d pids-limit hits",
			mib(u.MemoryBytes), mib(sb.Limits.MemoryMB<<20), u.Pids, mib(sb.Disk.UsedBytes), mib(sb.Disk.TotalBytes),
			sessions, u.Executions, u.CPUSeconds, u.OOMKills, u.PidsLimitHits)})
	}
	return checks
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
