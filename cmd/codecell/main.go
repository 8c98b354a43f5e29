// Command codecell runs untrusted Python and JavaScript in Linux sandboxes
// and returns Jupyter-style outputs. Each verb lives in a file of its own;
// the logic lives in internal/.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/codecell/codecell/internal/jail"
)

const usage = `codecell runs untrusted Python and JavaScript in Linux sandboxes.

Usage:
  codecell serve [flags]        serve the HTTP API (AIO Sandbox compatible)
  codecell run [flags] FILE|-   run code once in a fresh sandbox (or on a server: --server URL)
  codecell files put|get|ls     move files in and out of a server's sandbox
  codecell mcp [flags]          serve the Model Context Protocol on stdin and stdout
  codecell doctor [flags]       check every isolation layer and the runtimes
  codecell bench [flags]        measure latency, memory and throughput against baselines
  codecell soak [flags]         many clients for a while: errors, latency, leaks
  codecell version              print the version

Run "codecell VERB -h" for a verb's flags.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// A re-execution of this binary as the jail's set-up helper never returns.
	jail.RunHelperIfRequested()

	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch verb, args := os.Args[1], os.Args[2:]; verb {
	case "serve":
		err = serveCmd(ctx, args)
	case "run":
		err = runCmd(ctx, args)
	case "files":
		err = filesCmd(ctx, args)
	case "mcp":
		err = mcpCmd(ctx, args)
	case "doctor":
		err = doctorCmd(ctx, args)
	case "bench":
		err = benchCmd(ctx, args)
	case "soak":
		err = soakCmd(ctx, args)
	case "version", "--version", "-v":
		fmt.Println("codecell", version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "codecell: unknown command %q\n\n%s", verb, usage)
		os.Exit(2)
	}
	if err != nil {
		if e, ok := err.(exitError); ok {
			os.Exit(int(e))
		}
		fmt.Fprintln(os.Stderr, "codecell:", err)
		os.Exit(1)
	}
}

// exitError ends the program with a status and no message.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
