package sdk

// engine.go is the one place where the SDK's settings meet franz-go's kgo
// client, the engine below the Writer and the Reader: the options every
// client shares (the client ID, the connection policy as kgo's dialer
// with TLS done there, a kafka-go sasl.Mechanism as kgo's, the retry
// policy as kgo's backoff, kgo's logs into slog and the kafka-go Loggers,
// the hooks that feed Stats), the producer's options from a kafka.Writer
// (writerEngineOpts, acksOpts) and the consumer's from a
// kafka.ReaderConfig (Reader.engineOpts).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	kafkasasl "github.com/segmentio/kafka-go/sasl"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"golang.org/x/time/rate"

	"github.com/azkafka/azkafka/internal/frameguard"
	"github.com/azkafka/azkafka/metrics"
)

// metadataMinAge is the least time between two metadata requests of a
// client (kgo's MetadataMinAge, 5 s by default; Java's clients wait their
// retry backoff, 100 ms). After a broker dies, the first refresh still
// names it as leader; the next, which finds the new leader, comes this long
// after, not 5 s.
const metadataMinAge = 250 * time.Millisecond

// engineOpts returns the kgo options every client of the session shares:
// seed brokers, client ID, dialing through the connection policy with the
// base Dialer's TLS, SASL, timeouts and resolver, the retry backoff, the
// logger and hooks. info and errs are kafka-go's Logger and ErrorLogger
// (either may be nil).
func (s *session) engineOpts(brokers []string, info, errs kafka.Logger, h *engineHooks) []kgo.Opt {
	d := s.baseDialer
	if d == nil {
		d = kafka.DefaultDialer
	}
	backoff := s.retry.Backoff
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(s.clientID),
		kgo.Dialer(s.engineDial(d, h)),
		kgo.RetryBackoffFn(func(fails int) time.Duration {
			// kgo calls it with the failures so far (1 for the first
			// retry); a floor keeps full jitter from spinning.
			return max(backoff.Delay(fails-1), time.Millisecond)
		}),
		kgo.WithLogger(&engineLogger{slog: s.logger, info: info, errs: errs}),
		kgo.WithHooks(h),
		kgo.MetadataMinAge(metadataMinAge),
		// No KIP-714 metrics pushed to the brokers: kafka-go sends none,
		// and a broker that does not answer them holds Close for a
		// second. WithMetrics and WithEngineHooks export the client's.
		kgo.DisableClientMetrics(),
		kgo.BrokerMaxReadBytes(int32(min(s.maxResponse, 1<<31-1))),
	}
	if d.SASLMechanism != nil {
		opts = append(opts, kgo.SASL(saslAdapter{d.SASLMechanism}))
	}
	if h.metrics != nil {
		opts = append(opts, kgo.WithHooks(h.metrics))
	}
	if len(s.engineHooks) > 0 {
		opts = append(opts, kgo.WithHooks(s.engineHooks...))
	}
	return opts
}

// engineDial returns kgo's dial function: the connection policy around the
// base Dialer's own dial (DialFunc, else a net.Dialer with its LocalAddr,
// FallbackDelay and KeepAlive), its Resolver first, its Timeout and
// Deadline as the bound of the dial and the TLS handshake, then TLS with
// its config (ServerName defaults to the broker's host, as kafka-go does).
// Then h's wrappers: with h.zone, Fetch requests go through its rack
// rewriting (see zoneFallback); with h.seq, Produce responses through its
// sequence check (see seqConn; an idempotent Writer's only).
func (s *session) engineDial(d *kafka.Dialer, h *engineHooks) func(ctx context.Context, network, address string) (net.Conn, error) {
	dial := s.policy.wrap(baseDial(d), d.TLS != nil)
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		h.boot.dialing(address)
		if d.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d.Timeout)
			defer cancel()
		}
		if !d.Deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d.Deadline)
			defer cancel()
		}
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("sdk: broker address %s: %w", quote(address), err)
		}
		target := address
		if d.Resolver != nil {
			addrs, err := d.Resolver.LookupHost(ctx, host)
			if err != nil {
				return nil, fmt.Errorf("sdk: resolving %s with the Dialer's Resolver: %w", host, err)
			}
			if len(addrs) > 0 {
				target = addrs[0]
				if _, _, err := net.SplitHostPort(target); err != nil {
					target = net.JoinHostPort(target, port)
				}
			}
		}
		conn, err := dial(ctx, network, target)
		if err != nil {
			h.boot.failed(address, err)
			return nil, err
		}
		if d.TLS != nil {
			if conn, err = tlsHandshake(ctx, conn, d.TLS, address); err != nil {
				h.boot.failed(address, err)
				return nil, err
			}
		}
		return h.wrapConn(s.guard(conn, address), address), nil
	}
}

// wrapConn applies h's connection wrappers to c.
func (h *engineHooks) wrapConn(c net.Conn, addr string) net.Conn {
	if h.zone != nil {
		c = &rackConn{Conn: c, z: h.zone}
	}
	if h.seq != nil {
		c = newSeqConn(c, h.seq, addr)
	}
	return c
}

// saslAdapter runs a kafka-go sasl.Mechanism (PLAIN, SCRAM, AWS MSK IAM or
// the user's own) as kgo's: the same challenge-response exchange. The
// broker's host and port reach the mechanism through sasl.WithMetadata, as
// kafka-go passes them.
type saslAdapter struct{ m kafkasasl.Mechanism }

func (a saslAdapter) Name() string { return a.m.Name() }

func (a saslAdapter) Authenticate(ctx context.Context, address string) (sasl.Session, []byte, error) {
	host, p, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	port, _ := strconv.Atoi(p)
	ctx = kafkasasl.WithMetadata(ctx, &kafkasasl.Metadata{Host: host, Port: port})
	sm, first, err := a.m.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	return saslSession{ctx: ctx, sm: sm}, first, nil
}

type saslSession struct {
	ctx context.Context
	sm  kafkasasl.StateMachine
}

// Challenge hands the broker's challenge to the state machine. As in
// kafka-go, nothing more is sent once it reports done.
func (s saslSession) Challenge(challenge []byte) (bool, []byte, error) {
	done, resp, err := s.sm.Next(s.ctx, challenge)
	if done {
		return true, nil, err
	}
	return false, resp, err
}

// engineLogger sends kgo's log lines to slog and to kafka-go's Logger and
// ErrorLogger. kgo logs every join, sync and reconnect, and every error it
// retries, so its lines go to slog at Debug levels (Warn and Error at
// Debug, Info at Debug-2, Debug at Debug-4): what the SDK absorbed it logs
// itself, once per 5 s at Info, and what it could not absorb the caller
// gets as an error. The kafka-go Logger gets kgo's Info and up, the
// ErrorLogger Warn and up.
type engineLogger struct {
	slog *slog.Logger
	info kafka.Logger
	errs kafka.Logger
}

func slogLevel(l kgo.LogLevel) slog.Level {
	switch l {
	case kgo.LogLevelError, kgo.LogLevelWarn:
		return slog.LevelDebug
	case kgo.LogLevelInfo:
		return slog.LevelDebug - 2
	}
	return slog.LevelDebug - 4
}

func (l *engineLogger) Level() kgo.LogLevel {
	switch {
	case l.slog.Enabled(context.Background(), slogLevel(kgo.LogLevelDebug)):
		return kgo.LogLevelDebug
	case l.info != nil || l.slog.Enabled(context.Background(), slogLevel(kgo.LogLevelInfo)):
		return kgo.LogLevelInfo
	case l.errs != nil || l.slog.Enabled(context.Background(), slogLevel(kgo.LogLevelWarn)):
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelNone
}

func (l *engineLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if sl := slogLevel(level); l.slog.Enabled(context.Background(), sl) {
		l.slog.Log(context.Background(), sl, "azkafka: engine: "+msg, keyvals...)
	}
	var to kafka.Logger
	switch {
	case level <= kgo.LogLevelWarn && l.errs != nil:
		to = l.errs
	case level <= kgo.LogLevelInfo && l.info != nil:
		to = l.info
	}
	if to == nil {
		return
	}
	var b strings.Builder
	b.WriteString(msg)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fmt.Fprintf(&b, " %v=%v", keyvals[i], keyvals[i+1])
	}
	to.Printf("%s", b.String())
}

// engineHooks receives kgo's events for one client: the counters behind
// Stats, the last error kgo absorbed (so that a caller whose ctx ends hears
// why), and a metadata refresh after a peer closed a connection. Safe for
// concurrent use; the per-message path never touches it.
type engineHooks struct {
	az       string
	boot     *bootstrap
	zone     *zoneFallback // nil unless fetching from followers
	seq      *seqCheck     // nil but for a Writer
	client   atomic.Pointer[kgo.Client]
	counters *counters
	logger   *slog.Logger
	logSome  rate.Sometimes   // Info: once per 5 s
	warnSome rate.Sometimes   // Warn, once unreachable for warnAfter: once per 30 s
	rec      metrics.Recorder // nil without metrics
	metrics  *metricsHooks    // nil without metrics

	dials, dialFailures, fetches, fetchErrors atomic.Int64
	dialTime, readTime, waitTime              summary[time.Duration]

	brokersMu sync.Mutex
	brokers   map[int32]*brokerCounters
	// source is, per partition, the broker the last fetched batch of it
	// came from (a Reader's).
	source sync.Map // topicPartition -> *brokerCounters

	errSeq  atomic.Int64
	lastErr atomic.Pointer[error]
	// failingSince is when (unix nanoseconds) the engine met its first
	// error since a broker last answered; 0 while brokers answer. After
	// warnAfter of that, the errors it absorbs are logged at Warn.
	failingSince atomic.Int64
	warnAfter    time.Duration
	// answered: a broker answered a request since lastErr.
	answered atomic.Bool
	// okSince is when (unix nanoseconds) brokers began answering again
	// after errors, or first answered; lastFetch when a fetch response
	// last came back without error.
	okSince, lastFetch atomic.Int64
	// fatal is the last refusal (TLS verification, SASL, authorization)
	// since the last good connection; onFatal runs when one is recorded.
	fatal   atomic.Pointer[error]
	onFatal atomic.Pointer[func(error)]
}

type brokerCounters struct {
	node           int32
	addr, rack     string
	bytes, batches atomic.Int64
}

// newEngineHooks returns the hooks of a client of s with the bootstrap
// addresses seeds, after s's startRecorder; reader says whether the
// client is a Reader.
func newEngineHooks(s *session, c *counters, reader bool, seeds []string) *engineHooks {
	h := &engineHooks{
		az:       s.az,
		boot:     newBootstrap(seeds, s.bootstrapTimeout),
		counters: c,
		logger:   s.logger,
		logSome:  rate.Sometimes{Interval: 5 * time.Second},
		warnSome: rate.Sometimes{Interval: 30 * time.Second},
		brokers:  map[int32]*brokerCounters{},
		rec:      s.rec,
	}
	h.metrics = newMetricsHooks(s, h, reader)
	h.boot.onGiveUp = h.refuse
	return h
}

// refuse records err as a refusal no retry fixes and wakes the callers
// waiting for the engine.
func (h *engineHooks) refuse(err error) {
	h.lastErr.Store(&err)
	h.errSeq.Add(1)
	h.fatal.Store(&err)
	if f := h.onFatal.Load(); f != nil {
		(*f)(err)
	}
}

// rearm starts a new bootstrap attempt for a call made after one gave
// up, and forgets that refusal.
func (h *engineHooks) rearm() {
	if prev := h.boot.rearm(); prev != nil {
		if p := h.fatal.Load(); p != nil && *p == prev {
			h.fatal.CompareAndSwap(p, nil)
		}
	}
}

var (
	_ kgo.HookNewClient        = (*engineHooks)(nil)
	_ kgo.HookBrokerConnect    = (*engineHooks)(nil)
	_ kgo.HookBrokerRead       = (*engineHooks)(nil)
	_ kgo.HookBrokerWrite      = (*engineHooks)(nil)
	_ kgo.HookFetchBatchRead   = (*engineHooks)(nil)
	_ kgo.HookGroupManageError = (*engineHooks)(nil)
)

func (h *engineHooks) OnNewClient(cl *kgo.Client) { h.client.Store(cl) }

func (h *engineHooks) OnBrokerConnect(meta kgo.BrokerMetadata, d time.Duration, _ net.Conn, err error) {
	if h.zone != nil && err != nil {
		h.zone.failed(meta)
	}
	h.dials.Add(1)
	h.dialTime.observe(d)
	if err != nil {
		h.dialFailures.Add(1)
		h.noteError(err)
		return
	}
	h.fatal.Store(nil)
}

func (h *engineHooks) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil && !errors.Is(err, kgo.ErrClientClosed) && !errors.Is(err, context.Canceled) {
		h.noteError(fmt.Errorf("writing to broker %s: %w", brokerAddr(meta), err))
	}
}

func (h *engineHooks) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, wait, read time.Duration, err error) {
	if h.zone != nil {
		if err == nil {
			h.zone.served(meta)
		} else if !errors.Is(err, kgo.ErrClientClosed) && !errors.Is(err, context.Canceled) {
			h.zone.failed(meta)
		}
	}
	if err == nil && !h.answered.Load() {
		h.answered.Store(true)
	}
	if err == nil && (h.failingSince.Load() != 0 || h.okSince.Load() == 0) {
		h.okSince.Store(time.Now().UnixNano())
	}
	if err == nil && key == fetchKey {
		h.lastFetch.Store(time.Now().UnixNano())
	}
	if err == nil && h.failingSince.Load() != 0 {
		h.failingSince.Store(0)
	}
	switch {
	case err == nil && key == metadataKey:
		h.boot.answered()
	case err == nil:
		h.boot.heardFrom()
	case err != nil:
		h.boot.failed(brokerAddr(meta), err)
	}
	if key == fetchKey {
		h.fetches.Add(1)
		h.waitTime.observe(wait)
		h.readTime.observe(read)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
			// Not a fetch the client ended itself (a rebalance, SetOffset
			// or Close cancels the one in flight).
			h.fetchErrors.Add(1)
		}
	}
	if err != nil && !errors.Is(err, kgo.ErrClientClosed) && !errors.Is(err, context.Canceled) {
		h.noteError(fmt.Errorf("reading from broker %s: %w", brokerAddr(meta), err))
	}
}

func (h *engineHooks) OnFetchBatchRead(meta kgo.BrokerMetadata, topic string, partition int32, m kgo.FetchBatchMetrics) {
	b := h.broker(meta)
	b.bytes.Add(int64(m.CompressedBytes))
	b.batches.Add(1)
	tp := topicPartition{topic, partition}
	if old, ok := h.source.Load(tp); !ok || old.(*brokerCounters) != b {
		h.source.Store(tp, b)
	}
	if h.metrics != nil {
		h.metrics.fetched(meta, topic, partition, m)
	}
}

func (h *engineHooks) OnGroupManageError(err error) {
	if !errors.Is(err, kgo.ErrClientClosed) && !errors.Is(err, context.Canceled) {
		h.noteError(err)
	}
}

// fetchKey and metadataKey are the Fetch and Metadata requests' API keys.
const (
	fetchKey    = 1
	metadataKey = 3
)

func brokerAddr(meta kgo.BrokerMetadata) string {
	return net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
}

func (h *engineHooks) broker(meta kgo.BrokerMetadata) *brokerCounters {
	h.brokersMu.Lock()
	defer h.brokersMu.Unlock()
	b := h.brokers[meta.NodeID]
	if b == nil {
		b = &brokerCounters{node: meta.NodeID, addr: brokerAddr(meta)}
		if meta.Rack != nil {
			b.rack = *meta.Rack
		}
		h.brokers[meta.NodeID] = b
	}
	return b
}

// noteError records err as the last error the engine met. A refusal that
// waiting cannot fix (engineFatal) is kept for the callers; anything else
// counts as absorbed, and is logged at most once per 5 s.
func (h *engineHooks) noteError(err error) {
	err = kafkaError(err)
	h.answered.Store(false)
	h.lastErr.Store(&err)
	h.errSeq.Add(1)
	if engineFatal(err) {
		// Bytes that are not a Kafka response from a bootstrap address
		// the client never reached its cluster through: the bootstrap
		// decides, and gives up with its *BootstrapError once every
		// address failed so (the hook that tells it may come later).
		var fe *frameguard.Error
		if errors.As(err, &fe) {
			if h.boot.failed(fe.Addr, err); h.boot.givenUp() {
				return // refused with the *BootstrapError
			}
		}
		h.fatal.Store(&err)
		if f := h.onFatal.Load(); f != nil {
			(*f)(err)
		}
		return
	}
	h.counters.transient.Add(1)
	if h.rec != nil {
		h.rec.Absorbed(errorType(err))
	}
	now := time.Now()
	h.failingSince.CompareAndSwap(0, now.UnixNano())
	if d := now.Sub(time.Unix(0, h.failingSince.Load())); h.warnAfter > 0 && d > h.warnAfter {
		h.warnSome.Do(func() {
			h.logger.Warn("azkafka: no broker has answered for "+d.Round(100*time.Millisecond).String()+"; the engine keeps retrying",
				"error", err, "fix", "check that the brokers are up and reachable from here (azkafka diagnose)")
		})
		return
	}
	h.logSome.Do(func() {
		h.logger.Info("azkafka: the engine is retrying after a transient error", "error", err)
	})
}

// health is the engine's side of Reader.Health: unreachable once the
// errors have lasted longer than bound, started being when the client
// was created.
func (h *engineHooks) health(bound time.Duration, started time.Time) ReaderHealth {
	at := func(ns int64) time.Time {
		if ns == 0 {
			return time.Time{}
		}
		return time.Unix(0, ns)
	}
	out := ReaderHealth{State: HealthStarting, Since: started, LastFetch: at(h.lastFetch.Load())}
	switch failing := h.failingSince.Load(); {
	case h.fatalError() != nil:
		out.State, out.Cause = HealthRefused, h.fatalError()
		if failing != 0 {
			out.Since = at(failing)
		}
	case failing != 0:
		out.State, out.Since, out.Cause = HealthRetrying, at(failing), h.since(0)
		if time.Since(out.Since) > bound {
			out.State = HealthUnreachable
		}
	case h.okSince.Load() != 0:
		out.State, out.Since = HealthOK, at(h.okSince.Load())
	}
	return out
}

// fatalError returns the refusal recorded since the last good connection.
func (h *engineHooks) fatalError() error {
	if p := h.fatal.Load(); p != nil {
		return *p
	}
	return nil
}

// since returns the last error the engine met if one was recorded after
// mark (a value of errSeq) or no broker answered since it, else nil.
func (h *engineHooks) since(mark int64) error {
	if p := h.lastErr.Load(); p != nil && (h.errSeq.Load() != mark || !h.answered.Load()) {
		return *p
	}
	return nil
}

// refreshMetadata asks the engine for fresh metadata now: after a peer
// closed a connection (a WarpStream agent moving a client to its own
// zone, a broker going away), the next request goes where the cluster now
// says, not where it said up to MetadataMaxAge ago.
func (h *engineHooks) refreshMetadata() {
	if cl := h.client.Load(); cl != nil {
		cl.ForceMetadataRefresh()
	}
}

// fetchStats fills the fetch-by-broker part of SDKStats.
func (h *engineHooks) fetchStats(s *SDKStats) {
	h.brokersMu.Lock()
	ids := make([]int32, 0, len(h.brokers))
	for id := range h.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b := h.brokers[id]
		bf := BrokerFetch{
			NodeID:  id,
			Addr:    b.addr,
			Rack:    b.rack,
			InZone:  h.az != "" && b.rack == h.az,
			Bytes:   b.bytes.Load(),
			Batches: b.batches.Load(),
		}
		s.FetchBrokers = append(s.FetchBrokers, bf)
		s.FetchBytes += bf.Bytes
		if bf.InZone {
			s.FetchBytesInZone += bf.Bytes
		}
	}
	h.brokersMu.Unlock()
}

// summary accumulates the count, sum, minimum and maximum of values
// between two takes: kafka-go's SummaryStats and DurationStats.
type summary[T ~int64] struct {
	mu                 sync.Mutex
	count              int64
	sum, minimum, maxi T
}

func (s *summary[T]) observe(v T) {
	s.mu.Lock()
	if s.count == 0 || v < s.minimum {
		s.minimum = v
	}
	s.maxi = max(s.maxi, v)
	s.count++
	s.sum += v
	s.mu.Unlock()
}

// take returns the summary since the previous take and resets it.
func (s *summary[T]) take() (count int64, sum, minimum, maximum, avg T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	count, sum, minimum, maximum = s.count, s.sum, s.minimum, s.maxi
	if count > 0 {
		avg = sum / T(count)
	}
	s.count, s.sum, s.minimum, s.maxi = 0, 0, 0, 0
	return count, sum, minimum, maximum, avg
}

func durationStats(s *summary[time.Duration]) kafka.DurationStats {
	n, sum, lo, hi, avg := s.take()
	return kafka.DurationStats{Avg: avg, Min: lo, Max: hi, Count: n, Sum: sum}
}

func summaryStats(s *summary[int64]) kafka.SummaryStats {
	n, sum, lo, hi, avg := s.take()
	return kafka.SummaryStats{Avg: avg, Min: lo, Max: hi, Count: n, Sum: sum}
}

// writerEngineOpts maps the kafka.Writer onto kgo's producer, except for
// the acks and idempotence (acksOpts).
func (w *Writer) writerEngineOpts(kw *kafka.Writer) []kgo.Opt {
	c := w.conf
	opts := w.s.engineOpts(strings.Split(kw.Addr.String(), ","), kw.Logger, kw.ErrorLogger, w.hooks)
	timeout := max(min(c.writeTimeout, c.readTimeout), 100*time.Millisecond)
	linger := time.Duration(0) // a synchronous call is sent at once
	if w.async {
		linger = min(c.batchTimeout, time.Minute)
	}
	opts = append(opts,
		kgo.WithHooks(w.wh),
		kgo.RecordPartitioner(writerPartitioner{w}),
		kgo.ProducerBatchMaxBytes(engineBatchBytes(c.batchBytes, kw.Compression)),
		kgo.ProducerBatchCompression(engineCodec(kw.Compression)),
		kgo.ProduceRequestTimeout(timeout),
		kgo.RequestTimeoutOverhead(timeout),
		// No RecordDeliveryTimeout: the engine counts it from a record's
		// Timestamp, the user's Message.Time. Each record's Context ends
		// its budget instead (see budgetClock).
		kgo.ProducerLinger(linger),
		// A connection closed before its first answer is retried: a
		// broker limiting connection creation (KIP-612) and an agent
		// moving clients to their zone do that to healthy clients. A
		// TLS or SASL mismatch then shows as the last cause in the
		// error of a call whose ctx ended.
		kgo.AlwaysRetryEOF(),
		// A batch whose outcome is unknown (every response lost) fails
		// once the budget is spent instead of waiting forever; it may
		// have been stored once.
		kgo.AllowIdempotentProduceCancellation(),
	)
	if kw.AllowAutoTopicCreation {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	if t := w.s.baseTransport; t != nil {
		if t.IdleTimeout > 0 {
			opts = append(opts, kgo.ConnIdleTimeout(min(max(t.IdleTimeout, 100*time.Millisecond), 15*time.Minute)))
		}
	}
	return append(opts, kgo.MetadataMaxAge(w.metadataTTL()))
}

// metadataTTL is how old the Writer's view of the cluster (partitions,
// leaders) may grow: the Transport's MetadataTTL, kafka-go's 6 s when it
// sets none (the engine's own default is 5 minutes, which would leave
// partitions added to a topic unused for that long), within the engine's
// bounds.
func (w *Writer) metadataTTL() time.Duration {
	ttl := defaultMetadataTTL
	if t := w.s.baseTransport; t != nil && t.MetadataTTL > 0 {
		ttl = min(max(t.MetadataTTL, 10*time.Millisecond), time.Hour)
	}
	return max(ttl, metadataMinAge)
}

// engineBatchBytes is the engine's cap on a record batch for BatchBytes
// (counted as kafka-go counts a message), which the engine compares with
// the batch's size before compression, counted with the 4-byte length of
// the produce request's records field (the broker does not count it):
// room for any message kafka-go takes plus the batch header, but,
// uncompressed, no more than the default limit of a broker
// (max.message.bytes) when BatchBytes is no more, so that a full batch is
// not refused and the largest message kafka-go stores is stored.
// Compressed, the broker checks the compressed batch, and a message
// kafka-go takes is sent as kafka-go sends it (a full batch of messages
// that compress well enough may exceed the broker's limit, as kafka-go's
// does; a batch compression does not make smaller is sent uncompressed).
// The engine's bounds: 512 bytes to 100 MiB.
func engineBatchBytes(batchBytes int, codec kafka.Compression) int32 {
	const recordsLength = 4
	n := batchBytes + batchOverhead + recordsLength
	compressed := codec >= kafka.Gzip && codec <= kafka.Zstd // as engineCodec maps it
	if batchBytes <= brokerMaxMessageBytes && !compressed {
		n = min(n, brokerMaxMessageBytes+recordsLength)
	}
	return int32(min(max(n, 512), 100<<20))
}

// acksOpts are the engine's acks and idempotence for RequiredAcks.
func acksOpts(acks kafka.RequiredAcks, idempotent bool) []kgo.Opt {
	switch {
	case idempotent:
		// kgo keeps 5 produce requests in flight per broker with
		// idempotence (Produce v1+), its own fixed setting.
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}
	case acks == kafka.RequireAll:
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite()}
	case acks == kafka.RequireOne:
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}
	}
	return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}
}

// engineCodec is kafka-go's compression as the engine's codec.
func engineCodec(c kafka.Compression) kgo.CompressionCodec {
	switch c {
	case kafka.Gzip:
		return kgo.GzipCompression()
	case kafka.Snappy:
		return kgo.SnappyCompression()
	case kafka.Lz4:
		return kgo.Lz4Compression()
	case kafka.Zstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// engineOpts maps the ReaderConfig onto kgo's consumer.
func (r *Reader) engineOpts() []kgo.Opt {
	c := r.config
	fetchMax := readerFetchMax(c)
	opts := r.s.engineOpts(c.Brokers, c.Logger, c.ErrorLogger, r.hooks)
	opts = append(opts,
		kgo.FetchMaxWait(c.MaxWait),
		kgo.FetchMinBytes(int32(c.MinBytes)),
		// The first fetches ask for little, so that the first message
		// comes as soon as kafka-go's (which hands out records as it
		// reads them); poll raises the limits once the caller reads
		// fast (Reader.raiseFetchLimits).
		kgo.FetchMaxPartitionBytes(int32(min(c.MaxBytes, firstFetchMaxBytes))),
		kgo.FetchMaxBytes(int32(min(fetchMax, firstFetchMaxBytes))),
		kgo.WithPools(&readerSlabs),
	)
	if c.IsolationLevel == kafka.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	// Transaction markers come to the Reader, which hands none out but
	// moves its position past them (Reader.next), as Kafka's consumer
	// does: a partition whose log ends with one has no lag once read.
	opts = append(opts, kgo.KeepControlRecords())
	if r.s.fetchFromFollower {
		opts = append(opts, kgo.Rack(r.s.az), kgo.RecheckPreferredReplicaInterval(RecheckPreferredReplica))
	}
	// The engine keeps a partition out of range where it is; the Reader
	// places it as kafka-go's does (Reader.outOfRange).
	opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	if !r.group {
		return opts
	}
	topics := c.GroupTopics
	if len(topics) == 0 {
		topics = []string{c.Topic}
	}
	start := kgo.NewOffset().AtStart()
	if c.StartOffset == kafka.LastOffset {
		start = kgo.NewOffset().AtEnd()
	}
	opts = append(opts,
		kgo.ConsumerGroup(c.GroupID),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeStartOffset(start),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(c.SessionTimeout),
		kgo.RebalanceTimeout(c.RebalanceTimeout),
		kgo.HeartbeatInterval(c.HeartbeatInterval),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
		kgo.OnOffsetsFetched(r.offsetsFetched),
		kgo.AdjustFetchOffsetsFn(r.adjustOffsets),
	)
	if r.s.instanceID != "" {
		opts = append(opts, kgo.InstanceID(r.s.instanceID))
	}
	if c.WatchPartitionChanges {
		opts = append(opts, kgo.MetadataMaxAge(max(c.PartitionWatchInterval, metadataMinAge)))
	}
	if r.s.groupProtocol == GroupProtocolConsumer {
		// The broker assigns: range when the config lists range first,
		// else Kafka's default uniform assignor.
		b := kgo.CooperativeStickyBalancer()
		if r.rangeFirst {
			b = kgo.RangeBalancer()
		}
		return append(opts, kgo.Balancers(b), kgo.ServerSideBalancer())
	}
	bs := make([]kgo.GroupBalancer, 0, len(c.GroupBalancers))
	for _, b := range c.GroupBalancers {
		switch b.(type) {
		case CooperativeStickyGroupBalancer, *CooperativeStickyGroupBalancer:
			bs = append(bs, kgo.CooperativeStickyBalancer())
		default:
			bs = append(bs, &groupBalancer{b: b, partitions: r.partitions, onError: r.hooks.noteError})
		}
	}
	return append(opts, kgo.Balancers(bs...))
}

// readerFetchMax is the most a fetch response of a Reader with config c
// holds per broker (fetch.max.bytes).
func readerFetchMax(c kafka.ReaderConfig) int { return max(c.MaxBytes, DefaultFetchMaxBytes) }

// firstFetchMaxBytes bounds a Reader's fetches until its caller reads
// fast (Reader.raiseFetchLimits): a broker still returns a whole first
// record batch when it is larger (KIP-74), so nothing is refused; the
// first message is not held back while megabytes of others are read and
// decoded, nor are megabytes decoded ahead of a slow caller.
const firstFetchMaxBytes = 64 << 10
