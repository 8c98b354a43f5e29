package client

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/url"
	pathpkg "path"
	"time"
)

// FileInfo describes a file in the sandbox.
type FileInfo struct {
	Name        string    `json:"name"`
	Path        string    `json:"path"`
	IsDir       bool      `json:"is_directory"`
	Type        string    `json:"type"` // file, directory, symlink or other
	Size        int64     `json:"size"`
	ModTime     time.Time `json:"modified_time"`
	Permissions string    `json:"permissions"`           // octal, such as "644"
	LinkTarget  string    `json:"link_target,omitempty"` // for a symlink
}

// Written is where a write went and how many bytes it wrote.
type Written struct {
	Path string
	Size int64
}

// WriteFile writes what r holds to the file at path (a file's path, not a
// directory's), replacing it and creating missing parent directories. The content is streamed (multipart
// upload to /v2/fs/upload), never held in memory, so it may be large.
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader) (*Written, error) {
	const route = "/v2/fs/upload"
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		// The path goes first, so that the server can stream the file
		// straight to its place.
		err := mw.WriteField("path", path)
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", pathpkg.Base(path)); err == nil {
				if _, err = io.Copy(part, r); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err) // nil: EOF
	}()
	req, err := c.newRequest(ctx, "POST", sandboxRoute, route, nil, nil)
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("POST %s: %w", route, err)
	}
	req.Body = pr
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.send(req)
	pr.Close() // ends the writer if the request stopped reading early
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
	}
	if _, err := decodeEnvelope(req, resp.Body, &out); err != nil {
		return nil, err
	}
	return &Written{Path: out.Path, Size: out.Size}, nil
}

// WriteText writes text to the file at path, replacing it and creating
// missing parent directories.
func (c *Client) WriteText(ctx context.Context, path, text string) (*Written, error) {
	var out struct {
		Path         string `json:"path"`
		BytesWritten int64  `json:"bytes_written"`
	}
	body := map[string]any{"path": path, "content": text}
	if _, err := c.call(ctx, "POST", sandboxRoute, "/v2/fs/write", nil, body, &out); err != nil {
		return nil, err
	}
	return &Written{Path: out.Path, Size: out.BytesWritten}, nil
}

// ReadFile opens the file at path for reading (/v2/fs/download); the
// caller must close it. The content is streamed as it is read.
func (c *Client) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := c.newRequest(ctx, "GET", sandboxRoute, "/v2/fs/download", url.Values{"path": {path}}, nil)
	if err != nil {
		return nil, fmt.Errorf("GET /v2/fs/download: %w", err)
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Listing is a directory's entries.
type Listing struct {
	Path  string     `json:"path"`
	Files []FileInfo `json:"files"`
	// Truncated reports that the directory has more entries than the
	// server lists.
	Truncated bool `json:"truncated"`
}

// ListFiles lists the directory at path, hidden files included.
func (c *Client) ListFiles(ctx context.Context, path string) (*Listing, error) {
	var l Listing
	if _, err := c.call(ctx, "GET", sandboxRoute, "/v2/fs/list", url.Values{"path": {path}}, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Stat describes the file at path; a symlink is described, not followed.
func (c *Client) Stat(ctx context.Context, path string) (*FileInfo, error) {
	var fi FileInfo
	if _, err := c.call(ctx, "GET", sandboxRoute, "/v2/fs/stat", url.Values{"path": {path}}, nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// DeleteFile deletes the file, symlink or directory at path; a directory
// that is not empty only if recursive is set.
func (c *Client) DeleteFile(ctx context.Context, path string, recursive bool) error {
	body := map[string]any{"path": path, "recursive": recursive}
	_, err := c.call(ctx, "POST", sandboxRoute, "/v2/fs/delete", nil, body, nil)
	return err
}

// Mkdir creates the directory at path and any missing parents; a directory
// that exists already is no error. It returns the directory's entry.
func (c *Client) Mkdir(ctx context.Context, path string) (*FileInfo, error) {
	var fi FileInfo
	body := map[string]any{"path": path, "parents": true}
	if _, err := c.call(ctx, "POST", sandboxRoute, "/v2/fs/mkdir", nil, body, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}
