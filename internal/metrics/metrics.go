// Package metrics owns codecell's Prometheus metrics: what the server counts
// (executions, kernel deaths, HTTP requests) and measures (durations, queue
// waits), and the gauges read at scrape time (sandboxes, sessions, pools),
// all on a registry of its own served at /metrics.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Pool is one warm pool's state at scrape time.
type Pool struct {
	Sandbox, Name string // "python/data", "python/zygote", ...
	Size, Ready   int
	Failures      int // consecutive failed starts
}

// Sources are read at every scrape.
type Sources struct {
	Sandboxes func() int
	Sessions  func() int
	Pools     func() []Pool
	// PidsLimitHits is how often live sandboxes hit their process limit.
	PidsLimitHits func() int64
}

// Metrics are the server's metrics.
type Metrics struct {
	reg *prometheus.Registry

	// Executions counts finished executions by language, backend and
	// status (ok, error, timeout).
	Executions *prometheus.CounterVec
	// ExecutionSeconds is the wall time of executions by language.
	ExecutionSeconds *prometheus.HistogramVec
	// QueueWaitSeconds is how long executions waited behind earlier ones
	// of their session.
	QueueWaitSeconds prometheus.Histogram
	// KernelDeaths counts kernels that died during a cell, by reason
	// (out_of_memory, timeout, died).
	KernelDeaths *prometheus.CounterVec
	// HTTPRequests counts requests by route pattern and status code.
	HTTPRequests *prometheus.CounterVec
	// HTTPSeconds is the duration of requests by route pattern.
	HTTPSeconds *prometheus.HistogramVec
}

// New makes the metrics and registers them, with the Go runtime's and the
// process's own, on a new registry.
func New(src Sources) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		Executions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "codecell_executions_total",
			Help: "Executions finished, by language, backend and status."}, []string{"language", "backend", "status"}),
		ExecutionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "codecell_execution_duration_seconds",
			Help:    "Wall time of executions, kernel start included when there was one.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}, []string{"language"}),
		QueueWaitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "codecell_queue_wait_seconds",
			Help:    "Time executions waited behind earlier executions of their session.",
			Buckets: []float64{.0001, .001, .01, .1, 1, 10, 60}}),
		KernelDeaths: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "codecell_kernel_deaths_total",
			Help: "Kernels that died during a cell, by reason."}, []string{"reason"}),
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "codecell_http_requests_total",
			Help: "HTTP requests by route pattern and status code."}, []string{"route", "code"}),
		HTTPSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "codecell_http_request_duration_seconds",
			Help: "HTTP request durations by route pattern.", Buckets: prometheus.DefBuckets}, []string{"route"}),
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.Executions, m.ExecutionSeconds, m.QueueWaitSeconds, m.KernelDeaths, m.HTTPRequests, m.HTTPSeconds,
		&scraped{src: src})
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// scraped reports what Sources say at scrape time.
type scraped struct{ src Sources }

var (
	sandboxesDesc = prometheus.NewDesc("codecell_sandboxes", "Live sandboxes.", nil, nil)
	sessionsDesc  = prometheus.NewDesc("codecell_sessions", "Live sessions, all sandboxes.", nil, nil)
	poolSizeDesc  = prometheus.NewDesc("codecell_pool_size", "Kernels a warm pool keeps ready.", []string{"sandbox", "pool"}, nil)
	poolReadyDesc = prometheus.NewDesc("codecell_pool_ready", "Kernels ready in a warm pool.", []string{"sandbox", "pool"}, nil)
	poolFailDesc  = prometheus.NewDesc("codecell_pool_consecutive_failures", "Failed kernel starts in a row of a warm pool.", []string{"sandbox", "pool"}, nil)
	pidsDesc      = prometheus.NewDesc("codecell_pids_limit_hits", "Times live sandboxes hit their process limit.", nil, nil)
)

func (c *scraped) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sandboxesDesc, sessionsDesc, poolSizeDesc, poolReadyDesc, poolFailDesc, pidsDesc} {
		ch <- d
	}
}

func (c *scraped) Collect(ch chan<- prometheus.Metric) {
	if f := c.src.Sandboxes; f != nil {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(f()))
	}
	if f := c.src.Sessions; f != nil {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(f()))
	}
	if f := c.src.Pools; f != nil {
		for _, p := range f() {
			ch <- prometheus.MustNewConstMetric(poolSizeDesc, prometheus.GaugeValue, float64(p.Size), p.Sandbox, p.Name)
			ch <- prometheus.MustNewConstMetric(poolReadyDesc, prometheus.GaugeValue, float64(p.Ready), p.Sandbox, p.Name)
			ch <- prometheus.MustNewConstMetric(poolFailDesc, prometheus.GaugeValue, float64(p.Failures), p.Sandbox, p.Name)
		}
	}
	if f := c.src.PidsLimitHits; f != nil {
		ch <- prometheus.MustNewConstMetric(pidsDesc, prometheus.GaugeValue, float64(f()))
	}
}
