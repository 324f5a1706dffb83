package lockserver

import (
	"context"
	"net/http"
	"time"

	"github.com/lockserver/lockserver/replication"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Collector returns the server's metrics as a Prometheus collector, for the
// caller to register in a registry of its own: commands, errors, latency,
// connections, pub/sub, keys, memory and scripts, and a cluster member's Raft
// figures (docs/operations.md lists them all). Nothing is registered globally, and every
// Server has its own figures: two servers can share a registry when one is
// registered through prometheus.WrapRegistererWith with a label of its own.
// Figures are read when the registry collects them; serving commands costs
// the same whether a Collector is registered or not.
func (s *Server) Collector() prometheus.Collector {
	cs := collectors{s.srv.Collector()}
	if r, ok := s.engine.(*replication.Raft); ok {
		cs = append(cs, r.Collector())
	}
	return cs
}

type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// Ready reports whether the server is ready for clients, or why not. A
// standalone server is ready until it is closed. A cluster member is ready
// when it knows a leader and has applied every entry it knows to be
// committed, which it waits for until ctx ends: a member cut off from the
// others, or catching up, is not ready, and a load balancer or a Kubernetes
// readiness probe should send it no client. LOCKSERVER STATUS says the same.
func (s *Server) Ready(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if r, ok := s.engine.(*replication.Raft); ok {
		return r.Ready(ctx)
	}
	return nil
}

// Handler serves what a monitoring system asks of a server over HTTP:
// /metrics from gatherer (nil means a registry of this server's Collector
// alone), /healthz (200 while the process serves) and /readyz (200 when
// Ready, else 503 with the reason). The binary serves it on --metrics-addr;
// an embedding program may mount it on a server of its own.
func (s *Server) Handler(gatherer prometheus.Gatherer) http.Handler {
	if gatherer == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(s.Collector())
		gatherer = reg
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.closed.Load() {
			http.Error(w, ErrClosed.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyWait)
		defer cancel()
		if err := s.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}

// readyWait is how long /readyz lets a member catch up with what it knows
// to be committed: under load it is always a little behind.
const readyWait = 500 * time.Millisecond
