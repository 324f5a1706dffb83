package server

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// memory measures used memory for maxmemory and INFO.
//
// Used memory is the live heap at the end of the last garbage collection: what
// the data really holds, without the garbage a Go heap carries between
// collections (counting that would refuse writes spuriously just before each
// collection). Reading it is cheap but not free, so a sample is reused for
// sampleEvery; the hot path pays one atomic load when no maxmemory is set.
type memory struct {
	limit atomic.Int64 // maxmemory; 0 means none
	used  atomic.Int64 // bytes, last sample
	peak  atomic.Int64
	// resident is what the Go runtime holds from the OS and has not given
	// back, for INFO's used_memory_rss.
	resident atomic.Int64
	sampled  atomic.Int64 // when, in ns since memoryEpoch; 0 forces a sample
	lastGC   atomic.Int64 // when over() last asked for a collection

	mu      sync.Mutex // serialises sampling
	samples []metrics.Sample
}

const (
	sampleEvery = 10 * time.Millisecond
	// gcEvery bounds how often a refused write asks for a collection, so that
	// deleted data stops counting soon after it is deleted.
	gcEvery = time.Second
)

var memoryEpoch = time.Now()

// over reports whether used memory exceeds maxmemory.
func (m *memory) over() bool {
	limit := m.limit.Load()
	if limit == 0 {
		return false
	}
	if m.current() <= limit {
		return false
	}
	now := int64(time.Since(memoryEpoch))
	if last := m.lastGC.Load(); now-last >= int64(gcEvery) && m.lastGC.CompareAndSwap(last, now) {
		go func() {
			runtime.GC()
			m.sampled.Store(0)
		}()
	}
	return true
}

// current returns used memory, sampling it if the last sample is stale.
func (m *memory) current() int64 {
	now := int64(time.Since(memoryEpoch))
	if fresh(now, m.sampled.Load()) {
		return m.used.Load()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !fresh(now, m.sampled.Load()) {
		m.sample()
		m.sampled.Store(max(now, 1))
	}
	return m.used.Load()
}

// fresh reports whether a sample taken at sampled is recent enough at now; a
// zero sampled time means no sample yet.
func fresh(now, sampled int64) bool {
	return sampled != 0 && now-sampled < int64(sampleEvery)
}

// sample reads the live heap; before the first collection, when there is no
// live figure yet, it counts every allocated heap object.
func (m *memory) sample() {
	if m.samples == nil {
		m.samples = []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/gc/cycles/total:gc-cycles"},
			{Name: "/memory/classes/total:bytes"},
			{Name: "/memory/classes/heap/released:bytes"},
		}
	}
	metrics.Read(m.samples)
	used := int64(m.samples[0].Value.Uint64())
	if m.samples[2].Value.Uint64() == 0 {
		used = int64(m.samples[1].Value.Uint64())
	}
	m.used.Store(used)
	m.resident.Store(int64(m.samples[3].Value.Uint64() - m.samples[4].Value.Uint64()))
	if used > m.peak.Load() {
		m.peak.Store(used)
	}
}

// purge collects garbage, returns what it frees to the OS, and drops the
// sample, so that the next reading is the live heap of now.
func (m *memory) purge() {
	debug.FreeOSMemory()
	m.sampled.Store(0)
}

// setLimit changes maxmemory and takes a fresh sample, so that the next
// command is judged against the new limit at once.
func (m *memory) setLimit(n int64) {
	m.limit.Store(n)
	m.sampled.Store(0)
}
