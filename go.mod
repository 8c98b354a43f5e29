module github.com/codecell/codecell

go 1.26.0

require (
	github.com/elastic/go-seccomp-bpf v1.6.0
	golang.org/x/net v0.41.0
	golang.org/x/sys v0.50.0
)

require github.com/moby/sys/mountinfo v0.7.3
