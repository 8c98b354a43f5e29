package main

import (
	"github.com/codecell/codecell/internal/metrics"
	"github.com/codecell/codecell/internal/sandbox"
)

// metricSources reads the manager's sandboxes at scrape time.
func metricSources(mgr *sandbox.Manager) metrics.Sources {
	return metrics.Sources{
		Sandboxes: func() int { return len(mgr.List()) },
		Sessions: func() int {
			n := 0
			for _, sb := range mgr.List() {
				n += len(sb.Sessions(""))
			}
			return n
		},
		Pools: func() []metrics.Pool {
			var out []metrics.Pool
			for _, sb := range mgr.List() {
				for name, st := range sb.PoolStats() {
					out = append(out, metrics.Pool{Sandbox: sb.ID(), Name: name, Size: st.Size, Ready: st.Ready, Failures: st.Failures})
				}
			}
			return out
		},
		PidsLimitHits: func() int64 {
			var n int64
			for _, sb := range mgr.List() {
				if g := sb.Cgroup(); g != nil {
					hits, _ := g.PidsLimitHits()
					n += hits
				}
			}
			return n
		},
	}
}
