package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/codecell/codecell/internal/bench"
	"github.com/codecell/codecell/internal/kernel"
)

// soakCmd runs many clients against a server on loopback for a while and
// reports errors by status, latency, server memory and what was left
// behind.
func soakCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	var c common
	c.register(fs)
	clients := fs.Int("clients", 50, "concurrent clients")
	dur := fs.Duration("duration", 2*time.Minute, "how long they run")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Parse(args)

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := c.sandboxConfig(log)
	if err != nil {
		return err
	}
	cfg.Prewarm = map[kernel.Language]int{kernel.Python: 1, kernel.JavaScript: 1}
	res, err := bench.Soak(ctx, bench.SoakConfig{Sandbox: cfg, Clients: *clients, Duration: *dur})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Printf("%d requests from %d clients in %v; p50 %.1f ms, p99 %.1f ms\n", res.Requests, *clients, *dur, res.P50MS, res.P99MS)
	var statuses []int
	for s := range res.ByStatus {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	for _, s := range statuses {
		fmt.Printf("  status %d: %d\n", s, res.ByStatus[s])
	}
	for op, n := range res.ByOp {
		fmt.Printf("  %s: %d\n", op, n)
	}
	fmt.Printf("server heap in use: %.1f MB idle, %.1f MB after\n", res.HeapIdleMB, res.HeapAfterMB)
	fmt.Printf("errors: %d; left behind: %d\n", len(res.Errors), len(res.Leaks))
	for _, e := range append(res.Errors, res.Leaks...) {
		fmt.Println("  " + e)
	}
	if len(res.Errors) > 0 || len(res.Leaks) > 0 {
		return exitError(1)
	}
	return nil
}
