package main

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/jupyter"
	"github.com/codecell/codecell/internal/llm"
	"github.com/codecell/codecell/internal/sandbox"
)

// common holds the flags every verb that runs code shares. Each flag can
// also be given as a CODECELL_... environment variable.
type common struct {
	dataDir string
	unsafe  bool
	memory  string
	pids    int64
	cpus    float64
	disk    string
	output  string
	cgroup  string
	pyMode  string
	kernels string
	sparse  bool
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dataDir, "data-dir", env("CODECELL_DATA_DIR", defaultDataDir()), "directory for sandboxes' files and state (CODECELL_DATA_DIR)")
	fs.BoolVar(&c.unsafe, "unsafe-no-sandbox", envBool("CODECELL_UNSAFE_NO_SANDBOX"), "run code WITHOUT isolation; for hosts where the jail cannot work (CODECELL_UNSAFE_NO_SANDBOX)")
	fs.StringVar(&c.memory, "memory", env("CODECELL_MEMORY", "1G"), "memory limit per sandbox, no swap (CODECELL_MEMORY)")
	fs.Int64Var(&c.pids, "pids", int64(envInt("CODECELL_PIDS", 512)), "process and thread limit per sandbox (CODECELL_PIDS)")
	fs.Float64Var(&c.cpus, "cpus", float64(envInt("CODECELL_CPUS", 1)), "CPU quota per sandbox, in cores (CODECELL_CPUS)")
	fs.StringVar(&c.disk, "disk", env("CODECELL_DISK", "1G"), "disk quota per sandbox for home and /tmp (CODECELL_DISK)")
	fs.BoolVar(&c.sparse, "sparse-disks", envBool("CODECELL_SPARSE_DISKS"), "do not reserve each sandbox's disk quota on the host: denser, but if the data disk fills up, sandboxes writing then get I/O errors and their filesystems turn read-only (CODECELL_SPARSE_DISKS)")
	fs.StringVar(&c.cgroup, "cgroup-parent", env("CODECELL_CGROUP_PARENT", "codecell"), "cgroup under which sandboxes' groups are made (CODECELL_CGROUP_PARENT)")
	fs.StringVar(&c.pyMode, "python-mode", env("CODECELL_PYTHON_MODE", sandbox.PythonFork), "how Python kernels start: fork (forked from the sandbox's zygote, which has imported IPython and the preload modules) or spawn (a new interpreter in a new jail each) (CODECELL_PYTHON_MODE)")
	fs.StringVar(&c.kernels, "kernelspec-dir", env("CODECELL_KERNELSPEC_DIR", ""), "a directory of Jupyter kernelspecs (<dir>/kernels/<name>/kernel.json), searched before the standard Jupyter data directories (CODECELL_KERNELSPEC_DIR)")
	fs.StringVar(&c.output, "max-output", env("CODECELL_MAX_OUTPUT", "1M"), "output returned per cell; the rest is cut and marked (CODECELL_MAX_OUTPUT)")
}

// sandboxConfig builds the sandbox configuration, failing closed: without
// cgroups there is no way to bound a sandbox, so nothing runs.
func (c *common) sandboxConfig(log *slog.Logger) (sandbox.Config, error) {
	var lim sandbox.Limits
	var err error
	if lim.MemoryBytes, err = parseSize(c.memory); err != nil {
		return sandbox.Config{}, fmt.Errorf("--memory: %w", err)
	}
	if lim.DiskBytes, err = parseSize(c.disk); err != nil {
		return sandbox.Config{}, fmt.Errorf("--disk: %w", err)
	}
	if lim.OutputBytes, err = parseSize(c.output); err != nil {
		return sandbox.Config{}, fmt.Errorf("--max-output: %w", err)
	}
	lim.Pids, lim.CPUs = c.pids, c.cpus
	mode, err := sandbox.ParsePythonMode(c.pyMode)
	if err != nil {
		return sandbox.Config{}, fmt.Errorf("--python-mode: %w", err)
	}
	dirs := jupyter.DataDirs()
	if c.kernels != "" {
		dirs = append([]string{c.kernels}, dirs...)
	}
	specs, err := jupyter.FindKernelSpecs(dirs)
	if err != nil {
		log.Warn("some Jupyter kernelspecs are unusable", "err", err)
	}
	cfg := sandbox.Config{
		KernelSpecs:  specs,
		PythonMode:   mode,
		DataDir:      c.dataDir,
		CgroupParent: c.cgroup,
		SparseDisks:  c.sparse,
		Jail:         jail.Config{Unsafe: c.unsafe, Logger: log},
		Limits:       lim,
	}
	if c.unsafe {
		return cfg, nil
	}
	if os.Geteuid() != 0 {
		return cfg, fmt.Errorf("codecell must run as root to give each sandbox its own uid, cgroup and disk quota (see `codecell doctor`), or be started with --unsafe-no-sandbox")
	}
	if cfg.Cgroups, err = cgroup.Detect(); err != nil {
		return cfg, fmt.Errorf("resource limits unavailable, refusing to run code: %w", err)
	}
	return cfg, nil
}

func defaultDataDir() string {
	if os.Geteuid() == 0 {
		// Root's own home is 0700, which sandbox uids could not traverse.
		return "/var/lib/codecell"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "codecell")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "codecell")
}

func env(name, def string) string { return cmp.Or(os.Getenv(name), def) }

func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// parseSize reads sizes like 512M, 1G, 1048576.
func parseSize(orig string) (int64, error) {
	s := strings.TrimSpace(strings.ToUpper(orig))
	mult := int64(1)
	for suffix, m := range map[string]int64{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40} {
		if t, ok := strings.CutSuffix(strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I"), suffix); ok {
			s, mult = t, m
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("invalid size %q: use a number with an optional K, M, G or T suffix", orig)
	}
	return int64(n * float64(mult)), nil
}

// renderFlags bound results shaped for a language model (MCP tools and
// output_format "llm").
type renderFlags struct {
	chars, edge int
	imageBytes  string
}

func (r *renderFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&r.chars, "llm-max-chars", envInt("CODECELL_LLM_MAX_CHARS", 20000), "characters of text in a result for a model; the rest is cut from the middle with a marker (CODECELL_LLM_MAX_CHARS)")
	fs.IntVar(&r.edge, "llm-max-image-edge", envInt("CODECELL_LLM_MAX_IMAGE_EDGE", 1024), "longest side of an image in a result for a model, in pixels (CODECELL_LLM_MAX_IMAGE_EDGE)")
	fs.StringVar(&r.imageBytes, "llm-max-image-bytes", env("CODECELL_LLM_MAX_IMAGE_BYTES", "400K"), "largest image in a result for a model (CODECELL_LLM_MAX_IMAGE_BYTES)")
}

func (r *renderFlags) options() (llm.Options, error) {
	n, err := parseSize(r.imageBytes)
	if err != nil {
		return llm.Options{}, fmt.Errorf("--llm-max-image-bytes: %w", err)
	}
	// Two large images at once, however many requests carry them.
	return llm.Options{MaxChars: r.chars, MaxImageEdge: r.edge, MaxImageBytes: int(n), Decodes: make(chan struct{}, 2)}, nil
}
