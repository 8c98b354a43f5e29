package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/codecell/codecell/internal/api"
	"github.com/codecell/codecell/internal/audit"
	"github.com/codecell/codecell/internal/doctor"
	"github.com/codecell/codecell/internal/jupyter"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/mcp"
	"github.com/codecell/codecell/internal/metrics"
	"github.com/codecell/codecell/internal/observe"
	"github.com/codecell/codecell/internal/sandbox"
)

func serveCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	var c common
	c.register(fs)
	addr := fs.String("addr", env("CODECELL_ADDR", "127.0.0.1:18091"), "address to listen on (CODECELL_ADDR)")
	apiKey := fs.String("api-key", cmp.Or(os.Getenv("CODECELL_API_KEY"), os.Getenv("AIO_API_KEY")), "API key required on every route but /health (CODECELL_API_KEY or AIO_API_KEY)")
	insecure := fs.Bool("insecure", envBool("CODECELL_INSECURE"), "allow listening on a non-loopback address without an API key (CODECELL_INSECURE)")
	maxSandboxes := fs.Int("max-sandboxes", envInt("CODECELL_MAX_SANDBOXES", 100), "live sandboxes at most (CODECELL_MAX_SANDBOXES)")
	maxSessions := fs.Int("max-sessions", envInt("CODECELL_MAX_SESSIONS", sandbox.DefaultMaxSessions), "sessions per sandbox at most (CODECELL_MAX_SESSIONS)")
	idle := fs.Duration("session-idle", envDuration("CODECELL_SESSION_IDLE", 5*time.Minute), "end sessions idle for this long (CODECELL_SESSION_IDLE)")
	defTimeout := fs.Duration("default-timeout", envDuration("CODECELL_DEFAULT_TIMEOUT", 30*time.Second), "execution timeout when a request gives none (CODECELL_DEFAULT_TIMEOUT)")
	maxTimeout := fs.Duration("max-timeout", envDuration("CODECELL_MAX_TIMEOUT", 900*time.Second), "largest execution timeout a request may ask for (CODECELL_MAX_TIMEOUT)")
	maxBody := fs.String("max-body", env("CODECELL_MAX_BODY", "16M"), "largest JSON request body (CODECELL_MAX_BODY)")
	bodyTimeout := fs.Duration("body-timeout", envDuration("CODECELL_BODY_TIMEOUT", time.Minute), "time a client has to send a JSON body, 15 times that for an upload; slower clients get 408 (CODECELL_BODY_TIMEOUT)")
	// AIO's own names for its warm pools are accepted too.
	prewarmPy := fs.Int("prewarm-python", envInt("CODECELL_PREWARM_PYTHON", envInt("AIO_KERNEL_PREWARM", envInt("AIO_CODE_PREWARM", 1))),
		"started Python kernels each sandbox keeps ready (CODECELL_PREWARM_PYTHON, AIO_KERNEL_PREWARM)")
	prewarmJS := fs.Int("prewarm-javascript", envInt("CODECELL_PREWARM_JAVASCRIPT", envInt("AIO_CODE_PREWARM", 1)),
		"started JavaScript kernels each sandbox keeps ready (CODECELL_PREWARM_JAVASCRIPT, AIO_CODE_PREWARM)")
	backend := fs.String("code-backend", cmp.Or(os.Getenv("CODECELL_CODE_BACKEND"), os.Getenv("AIO_CODE_BACKEND"), api.BackendAuto),
		"what runs Python on the code routes: auto (the remote Jupyter server if set and reachable, else the native driver), native, or kernel (a Jupyter kernel: remote, else the python3 kernelspec in a jail) (CODECELL_CODE_BACKEND or AIO_CODE_BACKEND)")
	endpoint := fs.String("jupyter-endpoint", cmp.Or(os.Getenv("CODECELL_JUPYTER_ENDPOINT"), os.Getenv("AIO_JUPYTER_ENDPOINT")),
		"URL of a remote Jupyter server whose kernels run Python when it is reachable; its code runs there, without the sandbox's jail or files (CODECELL_JUPYTER_ENDPOINT or AIO_JUPYTER_ENDPOINT)")
	endpointToken := fs.String("jupyter-token", cmp.Or(os.Getenv("CODECELL_JUPYTER_TOKEN"), os.Getenv("AIO_JUPYTER_TOKEN"), os.Getenv("JUPYTER_TOKEN")),
		"token of the remote Jupyter server (CODECELL_JUPYTER_TOKEN, AIO_JUPYTER_TOKEN or JUPYTER_TOKEN)")
	auditPath := fs.String("audit-log", env("CODECELL_AUDIT_LOG", ""), "append a JSON line per execution to this file, rotated by size (CODECELL_AUDIT_LOG)")
	auditCode := fs.Bool("audit-code", envBool("CODECELL_AUDIT_CODE"), "write the code's text to the audit log, not only its sha256 (CODECELL_AUDIT_CODE)")
	auditSize := fs.Int("audit-max-size", envInt("CODECELL_AUDIT_MAX_SIZE", 100), "rotate the audit log at this many MB (CODECELL_AUDIT_MAX_SIZE)")
	var rf renderFlags
	rf.register(fs)
	logFormat := fs.String("log-format", env("CODECELL_LOG_FORMAT", "text"), "text or json (CODECELL_LOG_FORMAT)")
	fs.Parse(args)

	var handler slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if *logFormat == "json" {
		handler = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(handler)
	bodyBytes, err := parseSize(*maxBody)
	if err != nil {
		return fmt.Errorf("--max-body: %w", err)
	}
	if *apiKey == "" && !*insecure && !isLoopback(*addr) {
		return fmt.Errorf("refusing to serve on %s without an API key: set --api-key (or CODECELL_API_KEY), or pass --insecure", *addr)
	}
	cfg, err := c.sandboxConfig(log)
	if err != nil {
		return err
	}
	codeBackend, err := api.ParseBackend(*backend)
	if err != nil {
		return fmt.Errorf("--code-backend: %w", err)
	}
	if *endpoint != "" {
		if cfg.Remote, err = jupyter.NewServer(*endpoint, *endpointToken, nil); err != nil {
			return fmt.Errorf("--jupyter-endpoint: %w", err)
		}
	}
	render, err := rf.options()
	if err != nil {
		return err
	}
	var auditLog *audit.Log
	if *auditPath != "" {
		if auditLog, err = audit.Open(audit.Config{Path: *auditPath, MaxSizeMB: *auditSize, FullCode: *auditCode}); err != nil {
			return err
		}
		defer auditLog.Close()
	}
	cfg.MaxSessions = *maxSessions
	cfg.Prewarm = map[kernel.Language]int{kernel.Python: *prewarmPy, kernel.JavaScript: *prewarmJS}
	cfg.Limits.DefaultTimeout = *defTimeout
	cfg.MaxTimeout = *maxTimeout
	mgr := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg, MaxSandboxes: *maxSandboxes, SessionIdle: *idle, Logger: log})

	runtimes := doctor.ProbeRuntimes(cfg)
	layers := doctor.Prerequisites(cfg, runtimes)
	for _, l := range layers {
		if !l.OK && !c.unsafe {
			return fmt.Errorf("%s is missing (%s); run `codecell doctor` for how to fix it", l.Layer, l.Detail)
		}
	}
	m := metrics.New(metricSources(mgr))
	// MCP executions are recorded as the API's are; /mcp is behind the
	// same key.
	rec := &observe.Recorder{Metrics: m, Audit: auditLog, Logger: log}
	h := api.New(api.Config{
		Manager:        mgr,
		APIKey:         *apiKey,
		MaxBodyBytes:   bodyBytes,
		BodyTimeout:    *bodyTimeout,
		DefaultTimeout: *defTimeout,
		MaxTimeout:     *maxTimeout,
		Version:        version,
		Layers:         layers,
		Runtimes:       &runtimes,
		CodeBackend:    codeBackend,
		Render:         render,
		Metrics:        m,
		Audit:          auditLog,
		MCP: mcp.Handler(mcp.Config{Manager: mgr, Version: version, Render: render, Runtimes: &runtimes, Logger: log,
			Recorder: rec, KeyID: audit.KeyID(*apiKey)}),
		Logger: log,
	})
	// Re-open the sandboxes of the previous run (after a shutdown or a
	// crash) before anyone can ask for them; fails if another server has
	// this data directory.
	if err := mgr.Restore(ctx); err != nil {
		return fmt.Errorf("restoring sandboxes: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		mgr.Shutdown(context.Background())
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:          slog.NewLogLogger(handler, slog.LevelWarn),
	}
	reapCtx, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	go mgr.Run(reapCtx)

	log.Info("codecell serving", "addr", ln.Addr().String(), "data_dir", cfg.DataDir, "api_key", *apiKey != "", "sandbox", !c.unsafe)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		mgr.Shutdown(context.Background())
		return err
	case <-ctx.Done():
	}

	// Stop accepting, end every execution by ending its kernel, then wait
	// for the replies; nothing of any sandbox is left running or mounted.
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(shutdownCtx) }()
	mgrErr := mgr.Shutdown(shutdownCtx)
	srvErr := <-done
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		srvErr = errors.Join(srvErr, err)
	}
	if err := errors.Join(mgrErr, srvErr); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped cleanly")
	return nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}
