package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/codecell/codecell/internal/sandbox"
)

// POST /v2/sandboxes {id?, ttl_seconds?, labels?, limits?}: a new sandbox.
func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		ID         *string           `json:"id"`
		TTLSeconds *float64          `json:"ttl_seconds"`
		Labels     map[string]string `json:"labels"`
		Limits     *struct {
			MemoryMB       *int64   `json:"memory_mb"`
			Pids           *int64   `json:"pids"`
			CPUs           *float64 `json:"cpus"`
			DiskMB         *int64   `json:"disk_mb"`
			OutputBytes    *int64   `json:"output_bytes"`
			TimeoutSeconds *float64 `json:"timeout_seconds"`
		} `json:"limits"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return err
		}
	}
	opt := sandbox.Options{ID: deref(body.ID), Labels: body.Labels}
	if body.TTLSeconds != nil {
		if *body.TTLSeconds <= 0 {
			return invalid("ttl_seconds", "must be a positive number of seconds", "value_error.number")
		}
		opt.TTL = time.Duration(*body.TTLSeconds * float64(time.Second))
	}
	if l := body.Limits; l != nil {
		// Limits may be lowered per sandbox, never raised above the server's.
		max := s.cfg.Manager.Config().Sandbox.Limits.Or(sandbox.DefaultLimits)
		checks := []struct {
			field string
			v     *float64
			max   float64
			set   func(float64)
		}{
			{"limits.memory_mb", f64(l.MemoryMB), float64(max.MemoryBytes >> 20), func(v float64) { opt.Limits.MemoryBytes = int64(v) << 20 }},
			{"limits.pids", f64(l.Pids), float64(max.Pids), func(v float64) { opt.Limits.Pids = int64(v) }},
			{"limits.cpus", l.CPUs, max.CPUs, func(v float64) { opt.Limits.CPUs = v }},
			{"limits.disk_mb", f64(l.DiskMB), float64(max.DiskBytes >> 20), func(v float64) { opt.Limits.DiskBytes = int64(v) << 20 }},
			{"limits.output_bytes", f64(l.OutputBytes), float64(max.OutputBytes), func(v float64) { opt.Limits.OutputBytes = int64(v) }},
			{"limits.timeout_seconds", l.TimeoutSeconds, s.cfg.MaxTimeout.Seconds(), func(v float64) { opt.Limits.DefaultTimeout = time.Duration(v * float64(time.Second)) }},
		}
		for _, c := range checks {
			if c.v == nil {
				continue
			}
			if *c.v <= 0 || *c.v > c.max {
				return invalid(c.field, "must be more than 0 and at most the server's limit, "+strconv.FormatFloat(c.max, 'f', -1, 64), "value_error.number")
			}
			c.set(*c.v)
		}
	}
	sb, err := s.cfg.Manager.Create(r.Context(), opt)
	if errors.Is(err, sandbox.ErrInvalidID) {
		return invalid("id", err.Error(), "value_error")
	} else if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, envelope{Success: true, Message: "sandbox created", Data: s.sandboxInfo(sb)})
	return nil
}

// GET /v2/sandboxes[?label=key=value]: the live sandboxes.
func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	want := r.URL.Query()["label"]
	list := []map[string]any{}
next:
	for _, sb := range s.cfg.Manager.List() {
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if got, ok := sb.Labels()[k]; !ok || got != v {
				continue next
			}
		}
		list = append(list, s.sandboxInfo(sb))
	}
	return ok(w, map[string]any{"sandboxes": list})
}

// GET /v2/sandboxes/{sandbox_id}
func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.cfg.Manager.Get(r.PathValue("sandbox_id"))
	if err != nil {
		return err
	}
	return ok(w, s.sandboxInfo(sb))
}

// DELETE /v2/sandboxes/{sandbox_id}: its processes, cgroup and files go.
func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("sandbox_id")
	if err := s.cfg.Manager.Delete(r.Context(), id); err != nil {
		return err
	}
	return ok(w, map[string]any{"id": id, "deleted": true})
}

func f64(p *int64) *float64 {
	if p == nil {
		return nil
	}
	v := float64(*p)
	return &v
}
