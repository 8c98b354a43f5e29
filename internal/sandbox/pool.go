package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/codecell/codecell/internal/kernel"
)

// A pool keeps started, never-used kernels of one language ready in a
// sandbox, so that a new session or a one-shot run does not wait for an
// interpreter to start. Kernels are jailed per sandbox (its uid, its
// directories, its cgroup), so each sandbox has its own pools.
type pool struct {
	sb      *Sandbox
	lang    kernel.Language
	size    int
	preload []string // imported by every kernel before it is ready

	mu       sync.Mutex
	ready    []*Kernel // started, never executed anything
	starting int
	served   int   // kernels handed out
	failures int   // consecutive start failures
	lastErr  error // of the last failed start
	closed   bool

	wake chan struct{} // asks the refiller to top up
	done chan struct{} // closed when the refiller has stopped
}

// PoolStats describes a pool for the info routes.
type PoolStats struct {
	Size      int    `json:"size"`
	Ready     int    `json:"ready"`
	Starting  int    `json:"starting"`
	Served    int    `json:"served"`
	Failures  int    `json:"consecutive_failures"`
	LastError string `json:"last_error,omitempty"`
}

// warmNice is the CPU priority of kernels being started for a pool.
const warmNice = 10

func newPool(sb *Sandbox, lang kernel.Language, size int, preload []string) *pool {
	p := &pool{sb: sb, lang: lang, size: size, preload: preload, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go p.refill()
	p.poke()
	return p
}

// poke wakes the refiller. Preconditions: p.mu is held, or p is new.
func (p *pool) poke() {
	if p.closed {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take hands out a ready kernel, or nil if none is ready. A kernel that
// died while it waited is discarded, never handed out.
func (p *pool) take() *Kernel {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.poke()
	for len(p.ready) > 0 {
		k := p.ready[0]
		p.ready = p.ready[1:]
		if k.Alive() {
			p.served++
			k.Renice(0)
			return k
		}
		go k.Close()
	}
	return nil
}

// refill keeps the pool at its size until it is closed, backing off while
// kernels fail to start (the reason is in the pool's stats).
func (p *pool) refill() {
	defer close(p.done)
	for range p.wake {
		for {
			p.mu.Lock()
			need := !p.closed && len(p.ready)+p.starting < p.size
			if need {
				p.starting++
			}
			failures := p.failures
			p.mu.Unlock()
			if !need {
				break
			}
			if failures > 0 {
				time.Sleep(min(time.Duration(failures)*time.Second, 30*time.Second))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			// Kernels start at low priority, so that filling the pool does not
			// slow down the sandbox's live sessions; take restores it.
			k, err := p.sb.startKernel(ctx, p.lang, p.preload, warmNice)
			cancel()
			p.mu.Lock()
			p.starting--
			switch {
			case err != nil:
				p.failures++
				p.lastErr = err
			case p.closed:
				go k.Close()
			default:
				p.failures, p.lastErr = 0, nil
				p.ready = append(p.ready, k)
			}
			p.mu.Unlock()
		}
	}
}

func (p *pool) stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := PoolStats{Size: p.size, Ready: len(p.ready), Starting: p.starting, Served: p.served, Failures: p.failures}
	if p.lastErr != nil {
		s.LastError = p.lastErr.Error()
	}
	return s
}

// close stops refilling and ends the ready kernels.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	close(p.wake)
	p.mu.Unlock()
	<-p.done
	for _, k := range ready {
		k.Close()
	}
}
