// Package jupyter talks to Jupyter kernels. It owns kernelspec discovery
// (kernel.json files in the system-wide Jupyter data directories), connection
// files, the Jupyter messaging protocol (wire protocol 5.3: framing, HMAC
// signing and verification), a Client that speaks it to a kernel over
// ZeroMQ (Dial) or through a remote Jupyter Server's kernel websocket
// (Server.Connect), and the Jupyter Server REST calls that start, interrupt,
// restart and shut down remote kernels.
//
// It does not start kernel processes: a caller launches the argv of a
// KernelSpec with a connection file it wrote, then dials it.
//
// Everything a kernel sends is untrusted: code running in the kernel can
// write arbitrary bytes to its own sockets, and it can read the signing key.
// Signatures keep other local processes from injecting messages; against the
// kernel itself, frames and messages are bounded in size (MaxMessageSize),
// malformed messages are dropped, and no reply is trusted beyond the request
// it answers.
package jupyter
