// Package client is a Go client for a codecell server: it runs Python and
// JavaScript in the server's sandboxes, keeps sessions, and moves files in
// and out, over the server's HTTP API (the AIO Sandbox API).
//
// A Client is made with New from the server's base URL and options; it is
// safe for concurrent use and holds no mutable state, so one client can
// serve a whole program:
//
//	c, err := client.New("http://127.0.0.1:18091", client.WithAPIKey(key))
//	if err != nil {
//		return err
//	}
//	res, err := c.Execute(ctx, client.ExecuteRequest{
//		Language:  client.Python,
//		Code:      "import pandas as pd\npd.DataFrame({'x': [1, 2]}).describe()",
//		SessionID: "analysis", // state kept between executions
//	})
//	if err != nil {
//		return err // the request failed: see *APIError
//	}
//	if err := res.Err(); err != nil {
//		return err // the code raised an exception or timed out
//	}
//	fmt.Println(res.Stdout, res.Text())
//
// Every method takes a context, which bounds the wait for the server's
// reply; an execution's own limit is ExecuteRequest.Timeout, enforced by
// the server.
// Errors the server replies with are *APIError, wrapped with the method and
// path of the request ("GET /v2/fs/stat: 404 Not Found: ..."); use
// errors.As, or StatusCode, to inspect them. Code
// that raises an exception is not an error of the call: it is a Result
// whose Status is StatusError, and Result.Err describes it.
//
// Files are named as the sandbox's code sees them: absolute under
// /home/user or /tmp, relative to /home/user, or ~/...
//
// The unscoped client serves the server's default sandbox; Sandbox returns
// a client for another one (see CreateSandbox).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client talks to one codecell server, and to one sandbox of it.
type Client struct {
	root   string // the server's base URL, without a trailing slash
	prefix string // "" (the default sandbox) or /sandboxes/{id}
	apiKey string
	hc     *http.Client
}

// An Option configures a Client in New.
type Option func(*Client)

// WithAPIKey sends key as `Authorization: Bearer key` on every request, as
// a server started with --api-key requires.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient makes requests with hc instead of http.DefaultClient.
// A timeout on hc bounds executions too, so it must be longer than they.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the server at baseURL (such as
// "http://127.0.0.1:18091"; a path is kept, for a server behind a proxy
// that mounts it there). It reports an error for a URL that is not an
// absolute http or https URL.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client.New: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client.New: base URL %q: want http://HOST[:PORT] or https://...", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client.New: base URL %q: no query or fragment allowed", baseURL)
	}
	c := &Client{root: strings.TrimRight(u.String(), "/"), hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Sandbox returns a client like c whose sandbox routes (execution, sessions,
// files, capabilities) go to the sandbox id, under /sandboxes/{id}. The
// server routes (Health and the sandboxes API) are unchanged.
func (c *Client) Sandbox(id string) *Client {
	c2 := *c
	c2.prefix = "/sandboxes/" + url.PathEscape(id)
	return &c2
}

// APIError is an error reply of the server: a status of 400 or more, or an
// `error` event that ended a stream.
type APIError struct {
	StatusCode int
	// Message is the server's description of the problem.
	Message string
	// Detail is the reply's detail: a string, or for a 422 FastAPI-style
	// validation errors ([]any of {loc, msg, type} objects); nil if absent.
	Detail any
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// StatusCode returns the HTTP status of the *APIError in err's chain, or 0
// if there is none (the server was not reached, or replied nonsense).
func StatusCode(err error) int {
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ae.StatusCode
	}
	return 0
}

// envelope is every JSON reply: {success, message, data}, and detail on
// errors.
type envelope struct {
	Success bool            `json:"success"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Detail  any             `json:"detail"`
}

// sandboxRoute and serverRoute mark where a path is served.
const (
	sandboxRoute = true
	serverRoute  = false
)

// newRequest builds a request of path (escaped) with query and a JSON body
// (nil: none).
func (c *Client) newRequest(ctx context.Context, method string, scoped bool, path string, query url.Values, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := c.root
	if scoped {
		u += c.prefix
	}
	u += path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

// send sends req and returns the response if its status is below 400; an
// error status is read into an *APIError. Errors name the request, as
// every error of the package does: "GET /v2/fs/stat: 404 Not Found: ...".
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err // a *url.Error, which names the request
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, readAPIError(resp))
	}
	return resp, nil
}

// readAPIError reads an error reply. A body that is not the server's JSON
// (from a proxy, say) is kept, shortened, as the message.
func readAPIError(resp *http.Response) *APIError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	ae := &APIError{StatusCode: resp.StatusCode}
	var env envelope
	if json.Unmarshal(b, &env) == nil && (env.Message != "" || env.Detail != nil) {
		ae.Message, ae.Detail = env.Message, env.Detail
		return ae
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	ae.Message = msg
	return ae
}

// call sends a request and decodes the data of its JSON envelope into out
// (nil: ignored), returning the envelope's message.
func (c *Client) call(ctx context.Context, method string, scoped bool, path string, query url.Values, body, out any) (string, error) {
	req, err := c.newRequest(ctx, method, scoped, path, query, body)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	resp, err := c.send(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	return decodeEnvelope(req, resp.Body, out)
}

func decodeEnvelope(req *http.Request, r io.Reader, out any) (string, error) {
	var env envelope
	if err := json.NewDecoder(r).Decode(&env); err != nil {
		return "", fmt.Errorf("%s %s: reading the reply: %w", req.Method, req.URL.Path, err)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return "", fmt.Errorf("%s %s: decoding the reply's data: %w", req.Method, req.URL.Path, err)
		}
	}
	return env.Message, nil
}

// Health is the server's liveness reply.
type Health struct {
	Status  string `json:"status"` // "ok"
	Version string `json:"version"`
}

// Health reports whether the server is up; it needs no API key.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if _, err := c.call(ctx, "GET", serverRoute, "/health", nil, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Capabilities is what a sandbox offers: runtimes, limits and the isolation
// layers in force.
type Capabilities struct {
	CodeInterpreter struct {
		Backend        string            `json:"backend"` // native, kernel or remote
		Languages      []Language        `json:"languages"`
		JupyterKernels []string          `json:"jupyter_kernels"`
		PythonVersion  string            `json:"python_version"`
		PythonPackages map[string]string `json:"python_packages"`
		NodeVersion    string            `json:"node_version"`
		DefaultTimeout int               `json:"default_timeout"` // seconds
		MaxTimeout     int               `json:"max_timeout"`     // seconds
		SessionIdle    int               `json:"session_idle"`    // seconds
		MaxSessions    int               `json:"max_sessions"`
	} `json:"code_interpreter"`
	FileSystem struct {
		HomeDir string `json:"home_dir"`
		TmpDir  string `json:"tmp_dir"`
	} `json:"file_system"`
	Limits struct {
		MemoryBytes  int64   `json:"memory_bytes"`
		Pids         int64   `json:"pids"`
		CPUs         float64 `json:"cpus"`
		DiskBytes    int64   `json:"disk_bytes"`
		OutputBytes  int64   `json:"output_bytes"`
		MaxSandboxes int     `json:"max_sandboxes"`
		MaxBodyBytes int64   `json:"max_body_bytes"`
	} `json:"limits"`
	// Isolation maps each layer (namespaces, seccomp, cgroups...) to whether
	// it is active.
	Isolation map[string]struct {
		Active bool   `json:"active"`
		Detail string `json:"detail"`
	} `json:"isolation"`
}

// Capabilities describes the sandbox (GET /v1/capabilities).
func (c *Client) Capabilities(ctx context.Context) (*Capabilities, error) {
	var caps Capabilities
	if _, err := c.call(ctx, "GET", sandboxRoute, "/v1/capabilities", nil, nil, &caps); err != nil {
		return nil, err
	}
	return &caps, nil
}
