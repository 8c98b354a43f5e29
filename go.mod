module github.com/codecell/codecell

go 1.26.0

require (
	github.com/elastic/go-seccomp-bpf v1.6.0
	golang.org/x/net v0.41.0
	golang.org/x/sys v0.50.0
)

require github.com/moby/sys/mountinfo v0.7.3

require (
	github.com/coder/websocket v1.8.15
	github.com/go-zeromq/zmq4 v0.17.0
)

require (
	github.com/go-zeromq/goczmq/v4 v4.2.2 // indirect
	golang.org/x/sync v0.15.0 // indirect
	golang.org/x/text v0.26.0 // indirect
)
