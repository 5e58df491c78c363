// Package metricstest is a metrics.Provider for tests: it keeps every event
// of every client it served, and lets a test wait until they meet a
// condition (no sleeps).
//
//	p := metricstest.New()
//	w, _ := sdk.NewWriter(kw, sdk.WithMetrics(p))
//	...
//	rec := p.Only(t)
//	rec.Wait(t, "the batches", func() bool { return rec.Count("produced records") == 100 })
package metricstest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/azkafka/azkafka/metrics"
)

// Provider serves a Recorder per client. Safe for concurrent use.
type Provider struct {
	mu      sync.Mutex
	recs    []*Recorder
	changed chan struct{} // closed and replaced at every event
}

// New returns an empty Provider.
func New() *Provider { return &Provider{changed: make(chan struct{})} }

// Recorder implements metrics.Provider.
func (p *Provider) Recorder(c metrics.Client) metrics.Recorder {
	r := &Recorder{
		p:       p,
		client:  c,
		counts:  map[string]int64{},
		brokers: map[string]metrics.Broker{},
		sources: map[TopicPartition]Source{},
		lags:    map[TopicPartition]int64{},
	}
	p.mu.Lock()
	p.recs = append(p.recs, r)
	p.mu.Unlock()
	p.notify()
	return r
}

// Recorders returns the Recorders served so far, in order.
func (p *Provider) Recorders() []*Recorder {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Recorder(nil), p.recs...)
}

// Only returns the one Recorder served, failing the test unless there is
// exactly one.
func (p *Provider) Only(t testing.TB) *Recorder {
	t.Helper()
	rs := p.Recorders()
	if len(rs) != 1 {
		t.Fatalf("metricstest: %d recorders, want 1", len(rs))
	}
	return rs[0]
}

func (p *Provider) notify() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func (p *Provider) wait() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Source is what FetchSource last reported for a partition.
type Source struct {
	Broker   metrics.Broker
	Follower bool
}

// Consumed is one Consumed event.
type Consumed struct {
	TopicPartition
	Messages, Bytes int
	Lag             int64
}

// Query is one Queried event.
type Query struct {
	Store    string
	Outcome  metrics.QueryOutcome
	Copy     metrics.Copy
	Attempts int
	Duration time.Duration
}

// Recorder keeps one client's events. Counts are keyed by what happened:
//
//	"dialed ok", "dialed error", "closed <cause>", "waited <reason>" (and
//	"waited <reason> ns"), "requests", "requests api=<key>",
//	"request errors <type>", "request bytes written", "request bytes read",
//	"absorbed <type>", "produced batches", "produced records",
//	"produced bytes", "produced compressed bytes", "failed <type>"
//	(messages), "resent <cause>", "fetched batches", "fetched records",
//	"fetched bytes", "fetched compressed bytes", "consumed messages",
//	"consumed bytes", "released", "retried <op>", "txn begun",
//	"txn <outcome>", "txn ended", "txn ns", "client closed"
//
// Safe for concurrent use.
type Recorder struct {
	p      *Provider
	client metrics.Client

	mu        sync.Mutex
	counts    map[string]int64
	brokers   map[string]metrics.Broker // by address, as last reported
	sources   map[TopicPartition]Source
	lags      map[TopicPartition]int64
	consumed  []Consumed
	producers [][2]int64 // ID, epoch
	fallbacks []bool
	queries   []Query
}

var _ metrics.Recorder = (*Recorder)(nil)

// Client returns what the client's constructor described.
func (r *Recorder) Client() metrics.Client { return r.client }

// Count returns the count under key (see Recorder).
func (r *Recorder) Count(key string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[key]
}

// Counts returns a copy of every count.
func (r *Recorder) Counts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}

// Brokers returns the brokers reported by Requested, Produced, Fetched and
// FetchSource, by address.
func (r *Recorder) Brokers() map[string]metrics.Broker {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]metrics.Broker, len(r.brokers))
	for k, v := range r.brokers {
		out[k] = v
	}
	return out
}

// Sources returns the fetch source of each partition not released.
func (r *Recorder) Sources() map[TopicPartition]Source {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[TopicPartition]Source, len(r.sources))
	for k, v := range r.sources {
		out[k] = v
	}
	return out
}

// Lags returns the last lag of each partition not released.
func (r *Recorder) Lags() map[TopicPartition]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[TopicPartition]int64, len(r.lags))
	for k, v := range r.lags {
		out[k] = v
	}
	return out
}

// ConsumedEvents returns every Consumed event, in order.
func (r *Recorder) ConsumedEvents() []Consumed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Consumed(nil), r.consumed...)
}

// ProducerIDs returns every ProducerID event (ID, epoch), in order.
func (r *Recorder) ProducerIDs() [][2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][2]int64(nil), r.producers...)
}

// ZoneFallbacks returns every ZoneFallback event, in order.
func (r *Recorder) ZoneFallbacks() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.fallbacks...)
}

// Queries returns every Queried event, in order.
func (r *Recorder) Queries() []Query {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Query(nil), r.queries...)
}

// Wait returns once cond holds, checking it after every event; it fails
// the test if cond does not hold within 20 s.
func (r *Recorder) Wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		ch := r.p.wait()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("metricstest: waited 20s for %s; counts %v", what, r.Counts())
		}
	}
}

// add adds n to each key's count and runs more under the lock.
func (r *Recorder) add(n int64, keys ...string) {
	r.update(func() {
		for _, k := range keys {
			r.counts[k] += n
		}
	})
}

func (r *Recorder) update(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
	r.p.notify()
}

func (r *Recorder) TxnBegun() { r.add(1, "txn begun") }

func (r *Recorder) TxnEnded(outcome metrics.TxnOutcome, d time.Duration) {
	r.add(1, "txn "+outcome.String(), "txn ended")
	r.add(int64(d), "txn ns")
}

func (r *Recorder) Dialed(addr string, ok bool) {
	if ok {
		r.add(1, "dialed ok")
	} else {
		r.add(1, "dialed error")
	}
}

func (r *Recorder) ConnClosed(addr string, cause metrics.CloseCause) {
	r.add(1, "closed "+cause.String())
}

func (r *Recorder) DialWaited(addr string, reason metrics.WaitReason, d time.Duration) {
	r.update(func() {
		r.counts["waited "+reason.String()]++
		r.counts["waited "+reason.String()+" ns"] += int64(d)
	})
}

func (r *Recorder) Requested(b metrics.Broker, api int16, written, read int, d time.Duration, errType string) {
	r.update(func() {
		r.brokers[b.Addr] = b
		r.counts["requests"]++
		r.counts[fmt.Sprintf("requests api=%d", api)]++
		if errType != "" {
			r.counts["request errors "+errType]++
		}
		r.counts["request bytes written"] += int64(written)
		r.counts["request bytes read"] += int64(read)
	})
}

func (r *Recorder) Absorbed(errType string) { r.add(1, "absorbed "+errType) }

func (r *Recorder) Produced(b metrics.Broker, topic string, partition int32, records, bytes, compressed int) {
	r.update(func() {
		r.brokers[b.Addr] = b
		r.counts["produced batches"]++
		r.counts["produced records"] += int64(records)
		r.counts["produced bytes"] += int64(bytes)
		r.counts["produced compressed bytes"] += int64(compressed)
	})
}

func (r *Recorder) ProduceFailed(topic string, partition int32, messages int, errType string) {
	r.add(int64(messages), "failed "+errType)
}

func (r *Recorder) Resent(cause metrics.ResendCause) { r.add(1, "resent "+cause.String()) }

func (r *Recorder) ProducerID(id int64, epoch int16) {
	r.update(func() { r.producers = append(r.producers, [2]int64{id, int64(epoch)}) })
}

func (r *Recorder) Fetched(b metrics.Broker, topic string, partition int32, records, bytes, compressed int) {
	r.update(func() {
		r.brokers[b.Addr] = b
		r.counts["fetched batches"]++
		r.counts["fetched records"] += int64(records)
		r.counts["fetched bytes"] += int64(bytes)
		r.counts["fetched compressed bytes"] += int64(compressed)
	})
}

func (r *Recorder) Consumed(topic string, partition int32, messages, bytes int, lag int64) {
	tp := TopicPartition{topic, partition}
	r.update(func() {
		r.counts["consumed messages"] += int64(messages)
		r.counts["consumed bytes"] += int64(bytes)
		r.lags[tp] = lag
		r.consumed = append(r.consumed, Consumed{tp, messages, bytes, lag})
	})
}

func (r *Recorder) Released(topic string, partition int32) {
	tp := TopicPartition{topic, partition}
	r.update(func() {
		r.counts["released"]++
		delete(r.lags, tp)
		delete(r.sources, tp)
	})
}

func (r *Recorder) Retried(op metrics.Op) { r.add(1, "retried "+op.String()) }

func (r *Recorder) FetchSource(topic string, partition int32, b metrics.Broker, follower bool) {
	r.update(func() {
		r.brokers[b.Addr] = b
		r.sources[TopicPartition{topic, partition}] = Source{b, follower}
	})
}

func (r *Recorder) ZoneFallback(on bool) {
	r.update(func() { r.fallbacks = append(r.fallbacks, on) })
}

func (r *Recorder) Queried(store string, outcome metrics.QueryOutcome, chosen metrics.Copy, attempts int, d time.Duration) {
	r.update(func() { r.queries = append(r.queries, Query{store, outcome, chosen, attempts, d}) })
}

func (r *Recorder) Closed() { r.add(1, "client closed") }

// HotPathAllocations fails t when the Recorders p gives a Writer and a
// Reader allocate on the events clients send per request, batch and poll
// (Requested, Produced, Fetched, Consumed), once their series exist.
func HotPathAllocations(t testing.TB, p metrics.Provider) {
	t.Helper()
	w := p.Recorder(metrics.Client{Kind: metrics.KindWriter, UserID: "w", AZ: "az-a"})
	r := p.Recorder(metrics.Client{Kind: metrics.KindReader, UserID: "r", AZ: "az-a"})
	b := metrics.Broker{NodeID: 1, Addr: "b1:9092", Rack: "az-b"}
	for _, e := range []struct {
		name string
		f    func()
	}{
		{"Requested", func() { w.Requested(b, 0, 100, 50, time.Millisecond, "") }},
		{"Produced", func() { w.Produced(b, "orders", 0, 100, 1000, 500) }},
		{"Fetched", func() { r.Fetched(b, "orders", 0, 100, 1000, 500) }},
		{"Consumed", func() { r.Consumed("orders", 0, 100, 1000, 3) }},
	} {
		e.f() // the series are made
		if n := testing.AllocsPerRun(100, e.f); n != 0 {
			t.Errorf("%s allocates %v times per call", e.name, n)
		}
	}
}
