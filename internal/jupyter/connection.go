package jupyter

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// ConnectionInfo is the content of a kernel connection file: where the
// kernel's five sockets listen and the key that signs messages.
type ConnectionInfo struct {
	Transport       string `json:"transport"` // "ipc" or "tcp"
	IP              string `json:"ip"`        // for ipc, the socket path prefix
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name,omitempty"`
}

// Channel names one of a kernel's channels.
type Channel string

// The kernel channels.
const (
	Shell     Channel = "shell"
	IOPub     Channel = "iopub"
	Stdin     Channel = "stdin"
	Control   Channel = "control"
	Heartbeat Channel = "hb"
)

// allChannels returns every channel, in the order Dial connects them.
func allChannels() [5]Channel {
	return [...]Channel{Shell, Control, Stdin, IOPub, Heartbeat}
}

// maxSocketPath is the longest unix socket path Linux and libzmq accept:
// sun_path holds 108 bytes including the terminating NUL.
const maxSocketPath = 107

// signatureScheme is the only scheme Jupyter defines and this package speaks.
const signatureScheme = "hmac-sha256"

// NewIPC returns connection info for a kernel listening on unix sockets
// named pathPrefix-1 to pathPrefix-5, with a new random key. Unix socket
// paths are limited to 107 bytes, so pathPrefix must be short (a directory
// under /tmp or /run, not a deep work tree); NewIPC reports an error
// otherwise.
func NewIPC(pathPrefix string) (ConnectionInfo, error) {
	c := ConnectionInfo{
		Transport:       "ipc",
		IP:              pathPrefix,
		ShellPort:       1,
		IOPubPort:       2,
		StdinPort:       3,
		ControlPort:     4,
		HBPort:          5,
		Key:             newKey(),
		SignatureScheme: signatureScheme,
	}
	if err := c.check(); err != nil {
		return ConnectionInfo{}, fmt.Errorf("jupyter: new ipc connection: %w", err)
	}
	return c, nil
}

// NewTCP returns connection info for a kernel listening on TCP ports of ip
// (127.0.0.1 if empty) that are free now, with a new random key. Another
// process may take a port before the kernel binds it; jupyter_client has the
// same race.
func NewTCP(ip string) (ConnectionInfo, error) {
	if ip == "" {
		ip = "127.0.0.1"
	}
	var ports [5]int
	for i := range ports {
		// Hold every listener until all ports are chosen, so none repeats.
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return ConnectionInfo{}, fmt.Errorf("jupyter: new tcp connection: %w", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ConnectionInfo{
		Transport:       "tcp",
		IP:              ip,
		ShellPort:       ports[0],
		IOPubPort:       ports[1],
		StdinPort:       ports[2],
		ControlPort:     ports[3],
		HBPort:          ports[4],
		Key:             newKey(),
		SignatureScheme: signatureScheme,
	}, nil
}

// newKey returns 32 random bytes, hex-encoded. Jupyter uses the hex string
// itself, not the bytes it encodes, as the HMAC key.
func newKey() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b)
}

// port returns the port of ch.
func (c ConnectionInfo) port(ch Channel) int {
	switch ch {
	case Shell:
		return c.ShellPort
	case IOPub:
		return c.IOPubPort
	case Stdin:
		return c.StdinPort
	case Control:
		return c.ControlPort
	case Heartbeat:
		return c.HBPort
	}
	return 0
}

// Endpoint returns the ZeroMQ endpoint of ch: ipc://<ip>-<port> for ipc (the
// convention of jupyter_client and ipykernel), tcp://<ip>:<port> for tcp.
func (c ConnectionInfo) Endpoint(ch Channel) string {
	network, addr := c.netAddr(ch)
	if network == "unix" {
		return "ipc://" + addr
	}
	return "tcp://" + addr
}

// netAddr returns the network and address net.Dial takes for ch.
func (c ConnectionInfo) netAddr(ch Channel) (network, addr string) {
	port := strconv.Itoa(c.port(ch))
	if c.Transport == "ipc" {
		return "unix", c.IP + "-" + port
	}
	return "tcp", net.JoinHostPort(c.IP, port)
}

// check reports whether c is complete and usable.
func (c ConnectionInfo) check() error {
	if c.Transport != "ipc" && c.Transport != "tcp" {
		return fmt.Errorf("unknown transport %q", c.Transport)
	}
	if c.IP == "" {
		return errors.New("empty ip")
	}
	for _, ch := range allChannels() {
		if p := c.port(ch); p <= 0 || p > 65535 {
			return fmt.Errorf("%s port %d out of range", ch, p)
		}
		if _, addr := c.netAddr(ch); c.Transport == "ipc" && len(addr) > maxSocketPath {
			return fmt.Errorf("unix socket path %q is %d bytes, longer than the limit of %d", addr, len(addr), maxSocketPath)
		}
	}
	switch {
	case c.SignatureScheme == signatureScheme:
	case c.SignatureScheme == "" && c.Key == "":
	default:
		return fmt.Errorf("unsupported signature scheme %q", c.SignatureScheme)
	}
	return nil
}

// WriteFile writes c as a connection file readable by its owner only. It
// writes a temporary file and renames it, so a kernel never reads half a file.
func (c ConnectionInfo) WriteFile(path string) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("jupyter: write connection file: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".connection-*.json") // mode 0600
	if err != nil {
		return fmt.Errorf("jupyter: write connection file: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("jupyter: write connection file: %w", err)
	}
	return nil
}
