package jail

import "strings"

// baseEnv is the whole environment of user code apart from Spec.Env. It is
// built from scratch: nothing of the server's own environment (API keys,
// tokens, proxies) is ever copied in.
var baseEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=" + HomeDir,
	"USER=user",
	"LOGNAME=user",
	"SHELL=/bin/sh",
	"LANG=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"TERM=xterm-256color",
	"TMPDIR=" + TmpDir,
	"MPLBACKEND=Agg",
	"PYTHONUNBUFFERED=1",
	"PYTHONDONTWRITEBYTECODE=1",
	"PYTHONIOENCODING=utf-8",
	"NODE_DISABLE_COLORS=1",
	"NO_COLOR=1",
	// Threaded math libraries would otherwise size their pools to the host.
	"OPENBLAS_NUM_THREADS=1",
	"OMP_NUM_THREADS=1",
	"MKL_NUM_THREADS=1",
}

// allowedExtra are the variable names a caller may add or override through
// Spec.Env; anything else is dropped.
func allowedExtra(name string) bool {
	switch name {
	case "PWD", "TZ", "LANG", "LC_ALL", "TERM", "MPLBACKEND", "COLUMNS", "LINES",
		"PYTHONHASHSEED", "PYTHONPATH", "NODE_PATH", "NODE_OPTIONS":
		return true
	}
	return strings.HasPrefix(name, "CODECELL_USER_")
}

// Environ returns the environment for user code whose working directory is cwd.
func Environ(cwd string, extra []string) []string {
	env := append([]string(nil), baseEnv...)
	env = append(env, "PWD="+cwd)
	for _, kv := range extra {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !allowedExtra(name) {
			continue
		}
		env = setenv(env, name, kv)
	}
	return env
}

func setenv(env []string, name, kv string) []string {
	for i, e := range env {
		if strings.HasPrefix(e, name+"=") {
			env[i] = kv
			return env
		}
	}
	return append(env, kv)
}
