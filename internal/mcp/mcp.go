// Package mcp serves codecell over the Model Context Protocol: the tools a
// model uses to run code, keep sessions and move files in a sandbox, with
// results rendered for its context window (see internal/llm). The same
// server runs over stdio (`codecell mcp`) and over streamable HTTP (`/mcp`
// of `codecell serve`, behind its API key).
package mcp

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell/codecell/internal/doctor"
	"github.com/codecell/codecell/internal/llm"
	"github.com/codecell/codecell/internal/observe"
	"github.com/codecell/codecell/internal/sandbox"
)

// Config configures the MCP server.
type Config struct {
	Manager *sandbox.Manager
	Version string
	// Render bounds what a tool result may hold.
	Render llm.Options
	// LocalFiles enables the upload tool, which reads files of the machine
	// codecell runs on: only for stdio, where the MCP host is the user's own
	// program on the same machine, never for HTTP.
	LocalFiles bool
	// Runtimes are the interpreters as probed, for sandbox_info.
	Runtimes *doctor.Runtimes
	Logger   *slog.Logger
	// Recorder, if set, records executions in the metrics and the audit
	// log, as the HTTP API does, under KeyID (audit.KeyID of the key that
	// guards /mcp; empty over stdio).
	Recorder *observe.Recorder
	KeyID    string
	// SessionIdle is how long an MCP session over HTTP may stay idle
	// before the server forgets it (the client then starts a new one); 0
	// means DefaultSessionIdle. Clients that vanish without ending their
	// session would otherwise hold it for the life of the server.
	SessionIdle time.Duration
}

// DefaultSessionIdle is Config.SessionIdle's default.
const DefaultSessionIdle = time.Hour

// server holds what the tools share.
type server struct {
	cfg Config
	log *slog.Logger
}

// NewServer returns an MCP server with codecell's tools, working in the
// manager's default sandbox.
func NewServer(cfg Config) *gomcp.Server {
	s := &server{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default())}
	srv := gomcp.NewServer(&gomcp.Implementation{Name: "codecell", Title: "codecell sandbox", Version: cmp.Or(cfg.Version, "dev")},
		&gomcp.ServerOptions{Instructions: instructions, Logger: s.log})
	s.tools(srv)
	return srv
}

// Handler serves MCP over streamable HTTP.
func Handler(cfg Config) http.Handler {
	srv := NewServer(cfg)
	return gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return srv },
		&gomcp.StreamableHTTPOptions{SessionTimeout: cmp.Or(cfg.SessionIdle, DefaultSessionIdle)})
}

// RunStdio serves MCP on stdin and stdout until the client goes away or
// ctx ends.
func RunStdio(ctx context.Context, cfg Config) error {
	if err := NewServer(cfg).Run(ctx, &gomcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

const instructions = `codecell runs Python and JavaScript in an isolated Linux sandbox with no network.
Python has pandas, numpy, matplotlib and scipy; the value of a cell's last expression is shown, DataFrames as tables, figures as images.
Use a session_id to keep variables between calls. Files live in /home/user (the working directory) and /tmp: write_file and upload put data there, read_file and list_files get results back.`
