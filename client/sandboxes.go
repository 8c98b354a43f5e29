package client

import (
	"context"
	"net/url"
	"time"
)

// Limits bound a sandbox. In a SandboxRequest, zero fields keep the
// server's limits, and the others may only lower them.
type Limits struct {
	MemoryMB       int64   `json:"memory_mb,omitempty"`
	Pids           int64   `json:"pids,omitempty"`
	CPUs           float64 `json:"cpus,omitempty"`
	DiskMB         int64   `json:"disk_mb,omitempty"` // home and /tmp together
	OutputBytes    int64   `json:"output_bytes,omitempty"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"` // default execution timeout
}

// SandboxRequest describes a sandbox to create.
type SandboxRequest struct {
	// ID is 1-64 letters, digits, '-' or '_'; empty: made up by the server.
	ID string
	// TTL is the sandbox's lifetime; 0: until it is deleted.
	TTL    time.Duration
	Labels map[string]string
	Limits *Limits
}

// SandboxInfo describes a sandbox.
type SandboxInfo struct {
	ID string `json:"id"`
	// BasePath is where the sandbox's routes are served, /sandboxes/{id}:
	// use Client.Sandbox(ID).
	BasePath  string            `json:"base_path"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt *time.Time        `json:"expires_at"` // nil without a TTL
	Labels    map[string]string `json:"labels"`
	Limits    Limits            `json:"limits"`
	// Sessions counts the live sessions by language.
	Sessions map[string]int `json:"sessions"`
	Disk     struct {
		UsedBytes  int64 `json:"used_bytes"`
		TotalBytes int64 `json:"total_bytes"`
	} `json:"disk"`
	// Usage is the sandbox's live resource use when the server answered.
	Usage SandboxUsage `json:"usage"`
}

// SandboxUsage is what a sandbox uses now (memory, processes, disk), and what its
// executions used since the server opened it.
type SandboxUsage struct {
	MemoryBytes   int64   `json:"memory_bytes"` // page cache included
	Pids          int64   `json:"pids"`         // processes and threads
	DiskBytes     int64   `json:"disk_bytes"`
	Executions    int64   `json:"executions"`
	CPUSeconds    float64 `json:"cpu_seconds"` // of those executions
	OOMKills      int64   `json:"oom_kills"`
	PidsLimitHits int64   `json:"pids_limit_hits"`
}

// CreateSandbox creates a sandbox: its own uid, disk, cgroup and sessions.
// Its routes are those of c.Sandbox(info.ID).
func (c *Client) CreateSandbox(ctx context.Context, req SandboxRequest) (*SandboxInfo, error) {
	body := map[string]any{}
	if req.ID != "" {
		body["id"] = req.ID
	}
	if req.TTL != 0 {
		body["ttl_seconds"] = req.TTL.Seconds()
	}
	if req.Labels != nil {
		body["labels"] = req.Labels
	}
	if req.Limits != nil {
		body["limits"] = req.Limits
	}
	var info SandboxInfo
	if _, err := c.call(ctx, "POST", serverRoute, "/v2/sandboxes", nil, body, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// ListSandboxes lists the live sandboxes that carry all of labels (nil:
// every sandbox).
func (c *Client) ListSandboxes(ctx context.Context, labels map[string]string) ([]SandboxInfo, error) {
	q := url.Values{}
	for k, v := range labels {
		q.Add("label", k+"="+v)
	}
	var out struct {
		Sandboxes []SandboxInfo `json:"sandboxes"`
	}
	if _, err := c.call(ctx, "GET", serverRoute, "/v2/sandboxes", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Sandboxes, nil
}

// GetSandbox describes the sandbox id.
func (c *Client) GetSandbox(ctx context.Context, id string) (*SandboxInfo, error) {
	var info SandboxInfo
	if _, err := c.call(ctx, "GET", serverRoute, "/v2/sandboxes/"+url.PathEscape(id), nil, nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// DeleteSandbox deletes the sandbox id with its processes and files.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	_, err := c.call(ctx, "DELETE", serverRoute, "/v2/sandboxes/"+url.PathEscape(id), nil, nil, nil)
	return err
}
