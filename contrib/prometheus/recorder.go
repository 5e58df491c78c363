package azprom

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/metrics"
)

// recorder is one client's metrics.Recorder: the series of its labels,
// looked up once, and the state behind its gauges.
type recorder struct {
	metrics.Nop // events added to metrics later
	c           *Collector
	kind        metrics.Kind
	clientID    string
	az          string
	info        []string // azkafka_client_info's label values

	dialWaitLimiter, dialWaitRedial prometheus.Counter

	brokers metrics.Cache[int32, *brokerSeries]
	addrsMu sync.Mutex
	addrs   map[string]*addrSeries

	byAPI [128]atomic.Pointer[prometheus.Observer]

	noTopic *topicSeries // the series without a topic label
	topics  metrics.Cache[string, *topicSeries]

	mu         sync.Mutex // the state of the gauges below
	lags       map[partition]lagEntry
	followers  map[partition]bool
	fallback   bool
	idempotent bool
	sawID      bool
	closed     bool
}

type partition struct {
	topic string
	id    int32
}

type lagEntry struct {
	lag    int64
	series *topicSeries
}

// brokerSeries are the series of one broker as the engine knows it.
type brokerSeries struct {
	addr, rack        string
	sent, recv, fetch prometheus.Counter
}

// addrSeries are the series of one address the connection policy dials.
type addrSeries struct {
	dialsOK, dialsErr, redials prometheus.Counter
	open                       prometheus.Gauge
	closes                     [4]prometheus.Counter // by metrics.CloseCause
}

// topicSeries are the Writer's and Reader's series of one topic (or of
// all, without topic labels).
type topicSeries struct {
	wMessages, wBytes, wBatches prometheus.Counter
	rMessages, rBytes           prometheus.Counter
	lag                         prometheus.Gauge
}

func newRecorder(c *Collector, mc metrics.Client) *recorder {
	r := &recorder{
		c:        c,
		kind:     mc.Kind,
		clientID: mc.UserID,
		az:       mc.AZ,
		info:     []string{mc.Kind.String(), mc.UserID, mc.SessionID, mc.AZ, mc.AZSource},
		addrs:    map[string]*addrSeries{},
		lags:     map[partition]lagEntry{},
	}
	c.clientInfo.WithLabelValues(r.info...).Set(1)
	if mc.Kind == metrics.KindIQ {
		return r
	}
	r.dialWaitLimiter = c.dialWait.WithLabelValues(r.clientID, r.az, metrics.WaitLimiter.String())
	r.dialWaitRedial = c.dialWait.WithLabelValues(r.clientID, r.az, metrics.WaitRedial.String())
	switch mc.Kind {
	case metrics.KindWriter, metrics.KindReader:
		if !c.topics {
			r.noTopic = r.newTopicSeries("")
		}
	}
	// The state gauges exist from the start, at 0 until they are not.
	switch mc.Kind {
	case metrics.KindReader:
		r.followers = map[partition]bool{}
		c.readerFollowers.WithLabelValues(r.clientID, r.az).Add(0)
		c.readerFallback.WithLabelValues(r.clientID, r.az).Add(0)
	case metrics.KindWriter:
		g := c.writerIdempotent.WithLabelValues(r.clientID, r.az)
		if mc.Idempotent {
			r.idempotent = true
			g.Inc()
		}
	}
	return r
}

// labels returns the client's label values, then extra.
func (r *recorder) labels(extra ...string) []string {
	return append([]string{r.clientID, r.az}, extra...)
}

func (r *recorder) newTopicSeries(topic string) *topicSeries {
	c := r.c
	lv := r.labels()
	if c.topics {
		lv = append(lv, topic)
	}
	s := &topicSeries{}
	switch r.kind {
	case metrics.KindWriter:
		s.wMessages = c.writerMessages.WithLabelValues(lv...)
		s.wBytes = c.writerBytes.WithLabelValues(lv...)
		s.wBatches = c.writerBatches.WithLabelValues(lv...)
	case metrics.KindReader:
		s.rMessages = c.readerMessages.WithLabelValues(lv...)
		s.rBytes = c.readerBytes.WithLabelValues(lv...)
		s.lag = c.readerLag.WithLabelValues(lv...)
	}
	return s
}

// topic returns the series of topic, created on first use.
func (r *recorder) topic(topic string) *topicSeries {
	if r.noTopic != nil {
		return r.noTopic
	}
	return r.topics.Get(topic, nil, func() *topicSeries { return r.newTopicSeries(topic) })
}

// broker returns the series of b, created on first use.
func (r *recorder) broker(b metrics.Broker) *brokerSeries {
	current := func(s *brokerSeries) bool { return s.addr == b.Addr && s.rack == b.Rack }
	return r.brokers.Get(b.NodeID, current, func() *brokerSeries {
		inZone := strconv.FormatBool(b.InZone)
		if r.az == "" || b.Rack == "" {
			inZone = "unknown"
		}
		lv := r.labels(b.Addr, b.Rack, inZone)
		s := &brokerSeries{
			addr: b.Addr,
			rack: b.Rack,
			sent: r.c.sentBytes.WithLabelValues(lv...),
			recv: r.c.recvBytes.WithLabelValues(lv...),
		}
		if r.kind == metrics.KindReader {
			s.fetch = r.c.readerFetchBytes.WithLabelValues(lv...)
		}
		return s
	})
}

// addr returns the series of a dialed address, created on first use.
func (r *recorder) addr(addr string) *addrSeries {
	r.addrsMu.Lock()
	defer r.addrsMu.Unlock()
	s := r.addrs[addr]
	if s == nil {
		c := r.c
		s = &addrSeries{
			dialsOK:  c.dials.WithLabelValues(r.clientID, r.az, addr, "ok"),
			dialsErr: c.dials.WithLabelValues(r.clientID, r.az, addr, "error"),
			redials:  c.redials.WithLabelValues(r.clientID, r.az, addr),
			open:     c.connsOpen.WithLabelValues(r.clientID, r.az, addr),
		}
		for i := range s.closes {
			s.closes[i] = c.connCloses.WithLabelValues(r.clientID, r.az, addr, metrics.CloseCause(i).String())
		}
		r.addrs[addr] = s
	}
	return s
}

// apiNames are the Kafka APIs' names, by key.
var apiNames = func() (names [128]string) {
	for i := range names {
		names[i] = kmsg.NameForKey(int16(i))
	}
	return names
}()

func apiName(api int16) string {
	if api < 0 || int(api) >= len(apiNames) {
		return "Unknown"
	}
	return apiNames[api]
}

func (r *recorder) observer(api int16) prometheus.Observer {
	i := int(api)
	if i < 0 || i >= len(r.byAPI) {
		return r.c.reqDuration.WithLabelValues(r.clientID, r.az, "Unknown")
	}
	if o := r.byAPI[i].Load(); o != nil {
		return *o
	}
	o := r.c.reqDuration.WithLabelValues(r.clientID, r.az, apiNames[i])
	r.byAPI[i].Store(&o)
	return o
}

func (r *recorder) Dialed(addr string, ok bool) {
	s := r.addr(addr)
	if ok {
		s.dialsOK.Inc()
		s.open.Inc()
	} else {
		s.dialsErr.Inc()
	}
}

func (r *recorder) ConnClosed(addr string, cause metrics.CloseCause) {
	s := r.addr(addr)
	s.open.Dec()
	if int(cause) < len(s.closes) {
		s.closes[cause].Inc()
	}
}

func (r *recorder) DialWaited(addr string, reason metrics.WaitReason, d time.Duration) {
	switch reason {
	case metrics.WaitLimiter:
		r.dialWaitLimiter.Add(d.Seconds())
	case metrics.WaitRedial:
		r.dialWaitRedial.Add(d.Seconds())
		r.addr(addr).redials.Inc()
	}
}

func (r *recorder) Requested(b metrics.Broker, api int16, written, read int, d time.Duration, errType string) {
	s := r.broker(b)
	s.sent.Add(float64(written))
	s.recv.Add(float64(read))
	r.observer(api).Observe(d.Seconds())
	if errType != "" {
		r.c.reqErrors.WithLabelValues(r.clientID, r.az, b.Addr, apiName(api), errType).Inc()
	}
}

func (r *recorder) Absorbed(errType string) {
	r.c.absorbed.WithLabelValues(r.clientID, r.az, errType).Inc()
}

func (r *recorder) Produced(b metrics.Broker, topic string, _ int32, records, bytes, _ int) {
	s := r.topic(topic)
	s.wMessages.Add(float64(records))
	s.wBytes.Add(float64(bytes))
	s.wBatches.Inc()
}

func (r *recorder) ProduceFailed(topic string, _ int32, messages int, errType string) {
	lv := r.labels(errType)
	if r.c.topics {
		lv = append(lv, topic)
	}
	r.c.writerErrors.WithLabelValues(lv...).Add(float64(messages))
}

func (r *recorder) Resent(cause metrics.ResendCause) {
	r.c.writerResends.WithLabelValues(r.clientID, r.az, cause.String()).Inc()
}

func (r *recorder) ProducerID(id int64, _ int16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if id < 0 {
		if r.idempotent {
			r.idempotent = false
			r.c.writerIdempotent.WithLabelValues(r.clientID, r.az).Dec()
		}
		return
	}
	if r.sawID {
		r.c.writerEpochBumps.WithLabelValues(r.clientID, r.az).Inc()
	}
	r.sawID = true
}

func (r *recorder) Fetched(b metrics.Broker, _ string, _ int32, _, _, compressed int) {
	if s := r.broker(b); s.fetch != nil {
		s.fetch.Add(float64(compressed))
	}
}

func (r *recorder) Consumed(topic string, p int32, messages, bytes int, lag int64) {
	s := r.topic(topic)
	s.rMessages.Add(float64(messages))
	s.rBytes.Add(float64(bytes))
	k := partition{topic, p}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	old := r.lags[k]
	r.lags[k] = lagEntry{lag, s}
	if d := lag - old.lag; d != 0 {
		s.lag.Add(float64(d))
	}
}

func (r *recorder) Released(topic string, p int32) {
	k := partition{topic, p}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.lags[k]; ok {
		delete(r.lags, k)
		e.series.lag.Sub(float64(e.lag))
	}
	if r.followers[k] {
		r.c.readerFollowers.WithLabelValues(r.clientID, r.az).Dec()
	}
	delete(r.followers, k)
}

func (r *recorder) Retried(op metrics.Op) {
	r.c.readerRetries.WithLabelValues(r.clientID, r.az, op.String()).Inc()
}

func (r *recorder) FetchSource(topic string, p int32, _ metrics.Broker, follower bool) {
	k := partition{topic, p}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.followers == nil {
		return
	}
	was := r.followers[k]
	r.followers[k] = follower
	if was == follower {
		return
	}
	g := r.c.readerFollowers.WithLabelValues(r.clientID, r.az)
	if follower {
		g.Inc()
	} else {
		g.Dec()
	}
}

func (r *recorder) ZoneFallback(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.fallback == on {
		return
	}
	r.fallback = on
	g := r.c.readerFallback.WithLabelValues(r.clientID, r.az)
	if on {
		g.Inc()
	} else {
		g.Dec()
	}
}

func (r *recorder) Queried(store string, outcome metrics.QueryOutcome, chosen metrics.Copy, attempts int, d time.Duration) {
	lv := []string{r.az, outcome.String(), chosen.String()}
	av := []string{r.az}
	if r.c.topics {
		lv = append(lv, store)
		av = append(av, store)
	}
	r.c.iqQueries.WithLabelValues(lv...).Inc()
	r.c.iqAttempts.WithLabelValues(av...).Add(float64(attempts))
	r.c.iqDuration.WithLabelValues(r.az, outcome.String()).Observe(d.Seconds())
}

func (r *recorder) TxnBegun() { r.c.txnBegun.WithLabelValues(r.clientID, r.az).Inc() }

func (r *recorder) TxnEnded(outcome metrics.TxnOutcome, d time.Duration) {
	r.c.txnEnded.WithLabelValues(r.clientID, r.az, outcome.String()).Inc()
	r.c.txnDuration.WithLabelValues(r.clientID, r.az).Observe(d.Seconds())
}

// Closed drops the client's share of the gauges and its info series.
func (r *recorder) Closed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.c.clientInfo.DeleteLabelValues(r.info...)
	for k, e := range r.lags {
		e.series.lag.Sub(float64(e.lag))
		delete(r.lags, k)
	}
	n := 0
	for _, f := range r.followers {
		if f {
			n++
		}
	}
	if n > 0 {
		r.c.readerFollowers.WithLabelValues(r.clientID, r.az).Sub(float64(n))
	}
	if r.fallback {
		r.c.readerFallback.WithLabelValues(r.clientID, r.az).Dec()
	}
	if r.idempotent {
		r.c.writerIdempotent.WithLabelValues(r.clientID, r.az).Dec()
	}
}
