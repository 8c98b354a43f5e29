package jail

import (
	"fmt"
	"os"
	"path/filepath"
)

// systemMounts returns the bwrap options for the read-only view of the host
// that the runtimes need: /usr and the merged-/usr links (or the real /lib*
// and /bin on hosts that are not merged), and a few files from /etc. Nothing
// else of the host is visible: no /root, no /home, no /var, no /etc/shadow,
// no codecell data directory.
func systemMounts() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, dir := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		target, err := os.Readlink(dir)
		switch {
		case err == nil:
			args = append(args, "--symlink", target, dir)
		case exists(dir):
			args = append(args, "--ro-bind", dir, dir)
		}
	}
	for _, f := range etcFiles {
		if exists(f) {
			args = append(args, "--ro-bind", f, f)
		}
	}
	return args
}

// etcFiles are the host files under /etc that runtimes read and that hold no
// secrets. Identity files (passwd, group, hosts, nsswitch.conf) are synthetic.
var etcFiles = []string{
	"/etc/ld.so.cache",
	"/etc/localtime",
	"/etc/timezone",
	"/etc/os-release",
	"/etc/debian_version",
	"/etc/mime.types",
	"/etc/matplotlibrc", // Debian's matplotlib reads its defaults here
	"/etc/fonts",
	"/etc/R",            // R_HOME/etc links here: Renviron, ldpaths, Rprofile.site
	"/etc/alternatives", // /usr/bin links to runtimes go through it
	"/etc/ssl/certs",
	"/etc/ca-certificates.conf",
}

type etcFile struct {
	path    string
	content []byte
}

// syntheticEtc describes the jail's own user and host, so that getpwuid,
// `whoami`, `~` and localhost resolve without exposing the host's files.
func syntheticEtc() []etcFile {
	return []etcFile{
		{"/etc/passwd", fmt.Appendf(nil, "root:x:0:0:root:/root:/usr/sbin/nologin\nuser:x:%d:%d:sandbox user:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", UID, GID, HomeDir)},
		{"/etc/group", fmt.Appendf(nil, "root:x:0:\nuser:x:%d:\nnogroup:x:65534:\n", GID)},
		{"/etc/hosts", []byte("127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n")},
		{"/etc/nsswitch.conf", []byte("passwd: files\ngroup: files\nhosts: files\n")},
		{"/etc/resolv.conf", []byte("# no network in the sandbox\n")},
	}
}

func exists(path string) bool {
	_, err := os.Lstat(filepath.Clean(path))
	return err == nil
}
