package jupyter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"
)

// maxRESTBody bounds the JSON bodies read from a Jupyter Server.
const maxRESTBody = 8 << 20

// Server is a remote Jupyter Server, reached through its REST API and
// kernel websockets and authenticated with a token.
type Server struct {
	base  *url.URL // without a trailing slash
	token string
	hc    *http.Client
}

// NewServer returns a Server at baseURL (http or https, with the server's
// base_url path if it has one). hc is the HTTP client to use;
// http.DefaultClient if nil.
func NewServer(baseURL, token string, hc *http.Client) (*Server, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("jupyter: server: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("jupyter: server: %q is not an http or https URL", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Server{base: u, token: token, hc: hc}, nil
}

// StatusError is an HTTP answer of a Jupyter Server other than success.
type StatusError struct {
	Method     string
	Path       string
	StatusCode int
	Message    string // the server's explanation, if any
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// url returns the URL of the API path p (which starts with a slash).
func (s *Server) url(p string) *url.URL {
	u := *s.base
	u.Path += p
	return &u
}

// header returns the headers of every request.
func (s *Server) header() http.Header {
	return http.Header{"Authorization": {"token " + s.token}}
}

// do sends a request with in (if not nil) as its JSON body, and decodes
// the JSON answer into out (if not nil).
func (s *Server) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url(path).String(), body)
	if err != nil {
		return err
	}
	req.Header = s.header()
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return statusError(method, path, resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRESTBody)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decoding answer: %w", method, path, err)
	}
	return nil
}

// statusError returns the error for a failed response.
func statusError(method, path string, resp *http.Response) error {
	e := &StatusError{Method: method, Path: path, StatusCode: resp.StatusCode}
	var body struct {
		Message string `json:"message"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if json.Unmarshal(data, &body) == nil {
		e.Message = body.Message
	}
	return e
}

// Ping checks that the server is reachable and accepts the token.
func (s *Server) Ping(ctx context.Context) error {
	if err := s.do(ctx, http.MethodGet, "/api/status", nil, nil); err != nil {
		return fmt.Errorf("jupyter: server: ping: %w", err)
	}
	return nil
}

// KernelSpecs returns the server's kernelspecs by name and the name of the
// default one. Their Dir is empty: it would name a directory on the server.
func (s *Server) KernelSpecs(ctx context.Context) (string, map[string]KernelSpec, error) {
	var resp struct {
		Default     string `json:"default"`
		KernelSpecs map[string]struct {
			Spec KernelSpec `json:"spec"`
		} `json:"kernelspecs"`
	}
	if err := s.do(ctx, http.MethodGet, "/api/kernelspecs", nil, &resp); err != nil {
		return "", nil, fmt.Errorf("jupyter: server: kernelspecs: %w", err)
	}
	specs := make(map[string]KernelSpec, len(resp.KernelSpecs))
	for name, ks := range resp.KernelSpecs {
		spec := ks.Spec
		spec.Name = name
		if spec.InterruptMode == "" {
			spec.InterruptMode = "signal"
		}
		specs[name] = spec
	}
	return resp.Default, specs, nil
}

// StartKernel starts a kernel of the named kernelspec (the server's
// default if empty) and returns its id.
func (s *Server) StartKernel(ctx context.Context, name string) (string, error) {
	in := struct {
		Name string `json:"name,omitempty"`
	}{name}
	var kernel struct {
		ID string `json:"id"`
	}
	if err := s.do(ctx, http.MethodPost, "/api/kernels", in, &kernel); err != nil {
		return "", fmt.Errorf("jupyter: server: start kernel: %w", err)
	}
	if kernel.ID == "" {
		return "", errors.New("jupyter: server: start kernel: no id in the answer")
	}
	return kernel.ID, nil
}

// kernelPath returns the API path of kernel id.
func kernelPath(id string) string {
	return "/api/kernels/" + url.PathEscape(id)
}

// Interrupt interrupts kernel id, in whichever way its kernelspec says.
func (s *Server) Interrupt(ctx context.Context, id string) error {
	if err := s.do(ctx, http.MethodPost, kernelPath(id)+"/interrupt", nil, nil); err != nil {
		return fmt.Errorf("jupyter: server: interrupt: %w", err)
	}
	return nil
}

// Restart restarts kernel id; its websocket connections stay open.
func (s *Server) Restart(ctx context.Context, id string) error {
	if err := s.do(ctx, http.MethodPost, kernelPath(id)+"/restart", nil, nil); err != nil {
		return fmt.Errorf("jupyter: server: restart: %w", err)
	}
	return nil
}

// Shutdown shuts kernel id down.
func (s *Server) Shutdown(ctx context.Context, id string) error {
	if err := s.do(ctx, http.MethodDelete, kernelPath(id), nil, nil); err != nil {
		return fmt.Errorf("jupyter: server: shutdown: %w", err)
	}
	return nil
}

// alive checks that kernel id exists and is not dead.
func (s *Server) alive(ctx context.Context, id string) error {
	var kernel struct {
		ExecutionState string `json:"execution_state"`
	}
	if err := s.do(ctx, http.MethodGet, kernelPath(id), nil, &kernel); err != nil {
		return fmt.Errorf("jupyter: server: heartbeat: %w", err)
	}
	if kernel.ExecutionState == "dead" {
		return errors.New("jupyter: server: heartbeat: kernel is dead")
	}
	return nil
}

// Connect opens a Client on kernel id through the server's websocket, and
// waits until the kernel is ready, as Dial does. The server signs the
// messages it forwards to the kernel, so they carry no signature here.
func (s *Server) Connect(ctx context.Context, id string) (*Client, error) {
	session := rand.Text()
	u := s.url(kernelPath(id) + "/channels")
	u.Scheme = "ws"
	if s.base.Scheme == "https" {
		u.Scheme = "wss"
	}
	u.RawQuery = url.Values{"session_id": {session}}.Encode()
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient: s.hc,
		HTTPHeader: s.header(),
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			err = statusError(http.MethodGet, u.Path, resp)
		}
		return nil, fmt.Errorf("jupyter: server: connect: %w", err)
	}
	conn.SetReadLimit(MaxMessageSize)
	c := newClient(newWSTransport(conn), session, s, id)
	if err := c.waitReady(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("jupyter: server: connect: %w", err)
	}
	return c, nil
}
