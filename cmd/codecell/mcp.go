package main

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/codecell/codecell/internal/doctor"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/mcp"
	"github.com/codecell/codecell/internal/sandbox"
)

// mcpCmd serves MCP over stdio: an MCP host (a desktop or CLI agent)
// starts `codecell mcp` and talks to it on stdin and stdout. Logs go to
// stderr, which hosts show or keep.
func mcpCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ExitOnError)
	var c common
	c.register(fs)
	var r renderFlags
	r.register(fs)
	fs.Parse(args)

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	render, err := r.options()
	if err != nil {
		return err
	}
	cfg, err := c.sandboxConfig(log)
	if err != nil {
		return err
	}
	cfg.Prewarm = map[kernel.Language]int{kernel.Python: 1, kernel.JavaScript: 1}
	mgr := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg, Logger: log})
	defer mgr.Shutdown(context.WithoutCancel(ctx))
	go mgr.Run(ctx)
	rt := doctor.ProbeRuntimes(cfg)
	return mcp.RunStdio(ctx, mcp.Config{Manager: mgr, Version: version, Render: render, LocalFiles: true, Runtimes: &rt, Logger: log})
}
