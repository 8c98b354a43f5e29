// Package cgroup owns codecell's use of Linux control groups: detecting
// which hierarchy the host offers (cgroup v2 "unified", or cgroup v1 with
// one mount per controller), creating the per-sandbox group that carries a
// sandbox's resource budget (memory, pids, cpu), creating per-jail child
// groups beneath it, moving processes into them, reading their counters
// (OOM kills, peak memory, pids-limit hits), killing everything inside a
// group and removing the directories again.
//
// Layout. Groups are addressed by a slash-separated path relative to the
// root of each hierarchy, conventionally DefaultParent + "/" + sandbox id
// for a sandbox and one more component for a jail:
//
//	v2: <mount>/codecell/sb-abc/jail-1
//	v1: <memory mount>/codecell/sb-abc/jail-1, <pids mount>/codecell/...,
//	    <cpu mount>/codecell/..., and <freezer mount>/codecell/... if the
//	    freezer is mounted (used only to make Kill race-free).
//
// The first component is the configurable parent; codecell never creates
// anything outside it. On v1 the hierarchy is created below the root of
// each controller mount (found through /proc/self/mountinfo by super
// options, so co-mounts such as "cpu,cpuacct" work), not below the cgroup
// the current process happens to live in.
//
// cgroup v2 and the no-internal-process rule. On v2 a non-root cgroup that
// enables controllers for its children (cgroup.subtree_control) must not
// contain processes itself. Create therefore writes "+memory +pids +cpu"
// (those of them the parent offers) to the subtree_control of every
// ancestor of the new group, and Child enables them in the group it is
// called on. Consequently, once a sandbox group has a child, processes can
// only live in the children (jails), never in the sandbox group itself;
// Join on such a group fails with EBUSY. Likewise the configured parent
// (e.g. "codecell") is created directly under the mount root because on
// systemd hosts the cgroup of a service is typically a leaf that already
// holds processes. In a cgroup namespace whose root holds processes,
// enabling controllers at the mount root also fails with EBUSY; the caller
// must then first move its own processes into a leaf group.
//
// Swap is always disabled for limited groups (v2 memory.swap.max=0; v1
// memory.memsw.limit_in_bytes equal to the memory limit where swap
// accounting exists, and memory.swappiness=0), so a memory limit is a hard
// limit and exceeding it triggers the OOM killer inside the group.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// DefaultParent is the conventional first path component under which
// codecell creates all of its groups.
const DefaultParent = "codecell"

// Version is the cgroup hierarchy version: 1 or 2.
type Version int

const (
	// V1 is the legacy hierarchy with one mount per controller (or co-mount).
	V1 Version = 1
	// V2 is the unified hierarchy.
	V2 Version = 2
)

func (v Version) String() string { return "v" + strconv.Itoa(int(v)) }

// Controller names codecell cares about.
const (
	Memory  = "memory"
	Pids    = "pids"
	CPU     = "cpu"
	Freezer = "freezer" // v1 only, optional: used by Kill
)

// required controllers must be present for Detect to succeed; cpu is
// optional (Create fails only if a CPU quota is requested without it).
var required = []string{Memory, Pids}

// wanted is the ordered list of controllers reported by Controllers.
var wanted = []string{Memory, Pids, CPU}

// Host describes the cgroup hierarchy the host offers.
type Host struct {
	// Version is 1 or 2.
	Version Version
	// Unified is the cgroup2 mount point (v2 only).
	Unified string
	// V1Mounts maps a v1 controller name (memory, pids, cpu, freezer) to
	// the mount point of the hierarchy it is attached to (v1 only).
	// Co-mounted controllers map to the same mount point.
	V1Mounts map[string]string

	// available controllers (v2: from cgroup.controllers of the mount root;
	// v1: mounted).
	avail map[string]bool
}

// Detect reports which cgroup hierarchy the host offers for memory, pids
// and cpu, and where it is mounted. cgroup v2 is used if /sys/fs/cgroup is
// itself a cgroup2 mount or some cgroup2 mount offers both the memory and
// the pids controller; otherwise cgroup v1 is used if memory and pids are
// mounted. An error naming what is missing is returned otherwise.
func Detect() (*Host, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: reading the mount table: %w", err)
	}
	return detectFrom(mounts, readControllersFile)
}

func readControllersFile(mountpoint string) (string, error) {
	b, err := os.ReadFile(filepath.Join(mountpoint, "cgroup.controllers"))
	return string(b), err
}

// preferMount reports whether candidate a is a better mount of the same
// hierarchy than b: the full hierarchy (root "/") beats a bind-mounted
// subtree, and the conventional /sys/fs/cgroup location beats others.
func preferMount(a, b *mountinfo.Info) bool {
	ar, br := a.Root == "/", b.Root == "/"
	if ar != br {
		return ar
	}
	as := strings.HasPrefix(a.Mountpoint, "/sys/fs/cgroup")
	bs := strings.HasPrefix(b.Mountpoint, "/sys/fs/cgroup")
	if as != bs {
		return as
	}
	return false
}

// detectFrom picks a hierarchy from the mounts of mountinfo (lines of other
// filesystem types are ignored); controllersOf reads the
// cgroup.controllers file at a cgroup2 mount point.
func detectFrom(mounts []*mountinfo.Info, controllersOf func(string) (string, error)) (*Host, error) {
	// cgroup v2 candidates.
	var v2notes []string
	var v2best *Host
	for _, m := range mounts {
		if m.FSType != "cgroup2" {
			continue
		}
		s, err := controllersOf(m.Mountpoint)
		if err != nil {
			v2notes = append(v2notes, fmt.Sprintf("cgroup2 at %s: %v", m.Mountpoint, err))
			continue
		}
		avail := map[string]bool{}
		for _, c := range strings.Fields(s) {
			avail[c] = true
		}
		var missing []string
		for _, c := range required {
			if !avail[c] {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			v2notes = append(v2notes, fmt.Sprintf("cgroup2 at %s lacks %s", m.Mountpoint, strings.Join(missing, ", ")))
			continue
		}
		h := &Host{Version: V2, Unified: m.Mountpoint, avail: avail}
		if m.Mountpoint == "/sys/fs/cgroup" {
			return h, nil
		}
		if v2best == nil {
			v2best = h
		}
	}
	if v2best != nil {
		return v2best, nil
	}

	// cgroup v1.
	best := map[string]*mountinfo.Info{}
	for _, m := range mounts {
		if m.FSType != "cgroup" {
			continue
		}
		// The super options name the controllers: "rw,cpu,cpuacct".
		for _, o := range strings.Split(m.VFSOptions, ",") {
			switch o {
			case Memory, Pids, CPU, Freezer:
				if cur, ok := best[o]; !ok || preferMount(m, cur) {
					best[o] = m
				}
			}
		}
	}
	var missing []string
	for _, c := range required {
		if _, ok := best[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("cgroup: no usable hierarchy: cgroup v1 controller(s) %s not mounted", strings.Join(missing, ", "))
		if len(v2notes) > 0 {
			msg += "; " + strings.Join(v2notes, "; ")
		} else {
			msg += "; no cgroup2 mount"
		}
		return nil, errors.New(msg)
	}
	h := &Host{Version: V1, V1Mounts: map[string]string{}, avail: map[string]bool{}}
	for c, m := range best {
		h.V1Mounts[c] = m.Mountpoint
		h.avail[c] = true
	}
	return h, nil
}

// Controllers reports which of memory, pids and cpu are usable.
func (h *Host) Controllers() map[string]bool {
	out := make(map[string]bool, len(wanted))
	for _, c := range wanted {
		out[c] = h.avail[c]
	}
	return out
}

// String returns a human summary such as "v1 (memory, pids, cpu)" or
// "v2 at /sys/fs/cgroup (memory, pids; missing cpu)".
func (h *Host) String() string {
	var have, miss []string
	for _, c := range wanted {
		if h.avail[c] {
			have = append(have, c)
		} else {
			miss = append(miss, c)
		}
	}
	s := h.Version.String()
	if h.Version == V2 && h.Unified != "" && h.Unified != "/sys/fs/cgroup" {
		s += " at " + h.Unified
	}
	s += " (" + strings.Join(have, ", ")
	if len(miss) > 0 {
		s += "; missing " + strings.Join(miss, ", ")
	}
	return s + ")"
}

// v1Hierarchies returns the distinct v1 mount points codecell creates
// groups in (memory, pids, cpu, freezer; co-mounts once), in a stable order.
func (h *Host) v1Hierarchies() []v1dir {
	seen := map[string]bool{}
	var out []v1dir
	for _, c := range []string{Memory, Pids, CPU, Freezer} {
		mp, ok := h.V1Mounts[c]
		if !ok || seen[mp] {
			continue
		}
		seen[mp] = true
		out = append(out, v1dir{mount: mp})
	}
	for i := range out {
		for c, mp := range h.V1Mounts {
			if mp == out[i].mount {
				out[i].controllers = append(out[i].controllers, c)
			}
		}
		sort.Strings(out[i].controllers)
	}
	return out
}

type v1dir struct {
	mount       string
	controllers []string
}

// cleanRel validates a relative group path and returns it cleaned.
func cleanRel(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("cgroup: invalid group path %q: must be relative and non-empty", p)
	}
	c := filepath.Clean(p)
	for _, part := range strings.Split(c, "/") {
		if part == ".." || part == "." || part == "" {
			return "", fmt.Errorf("cgroup: invalid group path %q", p)
		}
		if strings.HasPrefix(part, "cgroup.") || strings.ContainsAny(part, "\x00\n") {
			return "", fmt.Errorf("cgroup: invalid group path component %q", part)
		}
	}
	return c, nil
}
