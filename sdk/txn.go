package sdk

// txn.go holds transactions (KIP-98, KIP-447, KIP-890): TxnWriter, whose
// writes are committed or aborted together, and what it shares with
// Processor (processor.go): the transactional producer on the engine, a
// kafka.Balancer as the engine's partitioner, and the counts behind
// TxnStats. It pairs with errors.go (the ErrTxn errors) and config.go
// (WithTransactionalID, WithTransactionTimeout).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/metrics"
)

// TxnWriter writes kafka-go messages in transactions: what the
// WriteMessages calls between Begin and Commit wrote becomes visible to
// read_committed readers (kafka.ReaderConfig.IsolationLevel
// kafka.ReadCommitted) all at once, or, after Abort or a failure, never.
// Messages of several calls and topics go in one transaction. It is the
// Java producer's transactional API (beginTransaction, send,
// commitTransaction, abortTransaction) with kafka-go's types:
//
//	w, err := sdk.NewTxnWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "orders"},
//		sdk.WithTransactionalID("billing-0"))
//	...
//	if err := w.Begin(); err != nil { ... }
//	if err := w.WriteMessages(ctx, msgs...); err != nil {
//		_ = w.Abort(ctx)
//		...
//	}
//	if err := w.Commit(ctx); err != nil { ... } // errors.Is(err, sdk.ErrTxnAborted): nothing was written
//
// The kafka.Writer gives the configuration: Addr, Topic (messages may name
// their own), Balancer (default kafka.RoundRobin), Compression,
// BatchBytes, WriteTimeout, AllowAutoTopicCreation, Transport (TLS, SASL,
// client ID as for NewWriter), Logger and ErrorLogger. RequiredAcks is not
// read: a transaction writes with acks=all and idempotence. Async is
// refused: a commit holds what the calls before it returned.
//
// The transactional ID (WithTransactionalID or $AZKAFKA_TRANSACTIONAL_ID)
// is required: one per instance, the same across its restarts, so that a
// restarted instance fences the one before it (whose Commit then fails
// with ErrTxnFenced) and aborts what it left open. Safe for concurrent
// use: WriteMessages may run in several goroutines within a transaction;
// Commit and Abort wait for the calls in flight.
type TxnWriter struct {
	*txnProducer
}

// NewTxnWriter returns a TxnWriter with w's configuration (see TxnWriter).
// It fails, naming the problem, without a transactional ID, with
// w.Async, with an invalid option or AZKAFKA_* variable, and when the
// cluster refuses the transactional producer (ErrTxnFenced,
// ErrTxnUnsupported, or within WriteTimeout the cluster's error) — it
// initializes the producer ID before returning, as Java's
// initTransactions.
func NewTxnWriter(w *kafka.Writer, opts ...Option) (*TxnWriter, error) {
	tp, err := newTxnProducer("NewTxnWriter", ctorTxnWriter, w, opts, nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), tp.conf.writeTimeout)
	defer cancel()
	if _, _, err := tp.cl.ProducerID(ctx); err != nil {
		tp.cl.Close()
		tp.s.stop()
		return nil, inCtor("NewTxnWriter", txnError("initializing the transactional producer", err, time.Time{}, 0, false))
	}
	return &TxnWriter{tp}, nil
}

// txnProducer is the transactional producer of a TxnWriter or a
// Processor on the engine's client cl, with a kafka.Writer's
// configuration.
type txnProducer struct {
	s        *session
	hooks    *engineHooks
	counters counters
	cl       *kgo.Client
	topic    string
	conf     writerConf
	kopts    []kgo.Opt // the engine's options
	// endTxn ends the open transaction on the engine (endLocked; a
	// Processor's goes through its group session).
	endTxn func(ctx context.Context, commit kgo.TransactionEndTry) (committed bool, err error)

	// mu orders the transaction's ends with its writes: WriteMessages
	// holds it shared, Begin, Commit, Abort and Close whole.
	mu    sync.RWMutex
	began time.Time // when the open transaction began; zero when none
	// unsettled is set when an end failed in a way the engine could not
	// confirm and the abort that settles it failed too (see settleLocked):
	// the engine still holds the transaction, and the next Begin (a
	// Processor's next FetchMessages) settles it first.
	unsettled bool
	closed    atomic.Bool
	stats     txnCounters
}

// newTxnProducer builds the producer of the constructor named ctorName
// (bit ctor) with kw's configuration; more are engine options of the
// caller's (a Processor's consumer).
func newTxnProducer(ctorName string, ctor ctor, kw *kafka.Writer, opts []Option, more func(*session, *engineHooks) ([]kgo.Opt, error)) (*txnProducer, error) {
	if kw == nil {
		return nil, fmt.Errorf("sdk: %s: the kafka.Writer is nil", ctorName)
	}
	if kw.Addr == nil {
		return nil, fmt.Errorf("sdk: %s: kafka.Writer.Addr is nil: set it, e.g. kafka.TCP(\"broker:9092\")", ctorName)
	}
	if kw.Async {
		return nil, fmt.Errorf("sdk: %s: kafka.Writer.Async is set: a transaction commits what its WriteMessages calls returned; unset it", ctorName)
	}
	base, ok := kw.Transport.(*kafka.Transport)
	if !ok && kw.Transport != nil {
		return nil, inCtor(ctorName, fmt.Errorf("kafka.Writer.Transport is a %T; only a *kafka.Transport can carry the client ID and connection policy", kw.Transport))
	}
	s, err := newSession(context.Background(), append([]Option{forCtor(ctor)}, withBaseTransport(base, opts)...))
	if err != nil {
		return nil, inCtor(ctorName, err)
	}
	if s.txnID == "" && ctor == ctorTxnWriter {
		return nil, fmt.Errorf("sdk: %s: no transactional ID: set %s or use sdk.WithTransactionalID (one per instance, kept across its restarts, e.g. the pod name)", ctorName, EnvTransactionalID)
	}
	tp := &txnProducer{s: s, topic: kw.Topic, conf: writerConfOf(kw, s)}
	tp.endTxn = tp.endLocked
	tp.hooks = startClient(s, metrics.Client{Kind: metrics.KindWriter, Topic: kw.Topic, Idempotent: true, TransactionalID: s.txnID},
		&tp.counters, false, strings.Split(kw.Addr.String(), ","))
	tp.stats.rec = s.rec
	balancer := kw.Balancer
	if balancer == nil {
		balancer = &kafka.RoundRobin{}
	}
	timeout := max(min(tp.conf.writeTimeout, tp.conf.readTimeout), 100*time.Millisecond)
	kopts := append(s.engineOpts(strings.Split(kw.Addr.String(), ","), kw.Logger, kw.ErrorLogger, tp.hooks),
		kgo.TransactionalID(s.txnID),
		kgo.TransactionTimeout(s.txnTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(&balancerPartitioner{b: balancer}),
		kgo.ProducerBatchMaxBytes(engineBatchBytes(tp.conf.batchBytes, kw.Compression)),
		kgo.ProducerBatchCompression(engineCodec(kw.Compression)),
		kgo.ProduceRequestTimeout(timeout),
		kgo.RequestTimeoutOverhead(timeout),
		kgo.AlwaysRetryEOF(),
	)
	if kw.AllowAutoTopicCreation {
		kopts = append(kopts, kgo.AllowAutoTopicCreation())
	}
	if more != nil {
		extra, err := more(s, tp.hooks)
		if err != nil {
			s.stop()
			return nil, inCtor(ctorName, err)
		}
		kopts = append(kopts, extra...)
		return tp, tp.start(ctorName, kopts, true)
	}
	return tp, tp.start(ctorName, kopts, false)
}

// start makes the engine's client, unless group: the Processor makes its
// session from kopts (processor.go) and sets cl.
func (tp *txnProducer) start(ctorName string, kopts []kgo.Opt, group bool) error {
	tp.kopts = kopts
	if group {
		return nil
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		tp.s.stop()
		return inCtor(ctorName, err)
	}
	tp.cl = cl
	tp.s.engineUp(tp.hooks)
	return nil
}

// Begin begins a transaction. It fails with ErrTxnAborted's cause when
// one is open, and with io.ErrClosedPipe after Close.
func (tp *txnProducer) Begin() error {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.closed.Load() {
		return io.ErrClosedPipe
	}
	if !tp.began.IsZero() {
		return errors.New("sdk: Begin: a transaction is open: Commit or Abort it first")
	}
	if tp.unsettled {
		ctx, cancel := context.WithTimeout(context.Background(), tp.conf.writeTimeout)
		err := tp.settleLocked(ctx)
		cancel()
		if err != nil {
			return err
		}
	}
	if err := tp.cl.BeginTransaction(); err != nil {
		return txnError("Begin", err, time.Time{}, 0, false)
	}
	tp.began = time.Now()
	tp.stats.begin()
	return nil
}

// WriteMessages writes msgs in the open transaction and returns once the
// cluster has them (not yet visible to read_committed readers): nil, or
// the first error (ctx's when it ended first). A message without a Topic
// goes to the Writer's; its partition is the Balancer's. After an error
// the transaction can only be aborted: Commit aborts it and returns
// ErrTxnAborted. Without an open transaction it returns ErrNoTxn.
func (tp *txnProducer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	tp.mu.RLock()
	defer tp.mu.RUnlock()
	if tp.closed.Load() {
		return io.ErrClosedPipe
	}
	if tp.began.IsZero() {
		return fmt.Errorf("sdk: WriteMessages: %w", ErrNoTxn)
	}
	if len(msgs) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, len(msgs))
	now := time.Now()
	for i := range msgs {
		recs[i] = tp.record(&msgs[i], now)
	}
	if err := tp.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		if ctx.Err() != nil {
			return newCtxError(ctx, err)
		}
		return txnError("WriteMessages", err, tp.began, tp.s.txnTimeout, false)
	}
	return nil
}

// record is m as the engine's record.
func (tp *txnProducer) record(m *kafka.Message, now time.Time) *kgo.Record {
	r := &kgo.Record{Topic: m.Topic, Key: m.Key, Value: m.Value, Timestamp: recordTime(m.Time, now)}
	if r.Topic == "" {
		r.Topic = tp.topic
	}
	if len(m.Headers) > 0 {
		r.Headers = make([]kgo.RecordHeader, len(m.Headers))
		for j, h := range m.Headers {
			r.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return r
}

// Commit commits the open transaction: every message its WriteMessages
// calls wrote becomes visible to read_committed readers. If a write
// failed, or the commit does, the transaction is aborted instead and the
// error matches ErrTxnAborted (ErrTxnTimedOut, ErrTxnCoordinator), unless
// this producer was fenced (ErrTxnFenced: Close it). When the cluster's
// answer to the commit never came (ctx ended, the connection closed), the
// error matches neither: the transaction may have been committed. Either
// way it is over: what is left of it on the cluster is aborted, here or
// by the next Begin. It waits for the WriteMessages calls in flight.
// Without an open transaction: ErrNoTxn.
func (tp *txnProducer) Commit(ctx context.Context) error {
	return tp.end(ctx, kgo.TryCommit, metrics.TxnAbort)
}

// Abort aborts the open transaction: nothing it wrote becomes visible to
// read_committed readers. Without an open transaction: ErrNoTxn.
func (tp *txnProducer) Abort(ctx context.Context) error {
	return tp.end(ctx, kgo.TryAbort, metrics.TxnAbort)
}

// end ends the open transaction, committing if commit; cause names an
// abort for the stats.
func (tp *txnProducer) end(ctx context.Context, commit kgo.TransactionEndTry, cause metrics.TxnOutcome) error {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	op := "Commit"
	if !commit {
		op = "Abort"
	}
	if tp.began.IsZero() {
		return fmt.Errorf("sdk: %s: %w", op, ErrNoTxn)
	}
	began := tp.began
	committed, err := tp.endTxn(ctx, commit)
	// An end the cluster did not answer (a context or connection error,
	// not a Kafka error code) leaves the engine's transaction open; a
	// commit may have been committed.
	unanswered := err != nil && !committed && !brokerAnswered(err) && !errors.Is(err, ErrTxnAborted)
	if unanswered {
		tp.unsettled = true
		if serr := tp.settleLocked(ctx); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	unknown := unanswered && bool(commit) && !errors.As(err, new(commitNotSent))
	return tp.settle(op, began, committed, bool(commit), unknown, cause, err)
}

// commitNotSent is the error of a commit that ended before the engine
// asked the cluster to commit (the flush of its writes failed): it was
// not committed.
type commitNotSent struct{ err error }

func (e commitNotSent) Error() string { return e.err.Error() }
func (e commitNotSent) Unwrap() error { return e.err }

// brokerAnswered reports whether err holds the cluster's own answer (a
// Kafka error code), as opposed to a context or connection error.
func brokerAnswered(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke)
}

// settleLocked aborts, once more, a transaction whose end failed. The
// engine keeps a transaction open when it cannot confirm how its end went
// (the connection to the coordinator closed under the EndTxn, the
// coordinator died with it) until an abort retries it, and refuses to
// begin another until then. The retry initialises the producer ID again,
// which bumps its epoch: a transaction the cluster still has open is
// fenced and aborted, so nothing of it becomes visible. An end that
// failed otherwise has nothing left open, and the retry returns at once.
// tp.mu is held.
func (tp *txnProducer) settleLocked(ctx context.Context) error {
	if _, err := tp.endTxn(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("sdk: settling the transaction whose end failed (the next Begin tries again): %w", err)
	}
	tp.unsettled = false
	return nil
}

// endLocked ends the transaction on the engine: flush and commit, or
// drop what is buffered and abort; a failed commit is aborted.
func (tp *txnProducer) endLocked(ctx context.Context, commit kgo.TransactionEndTry) (committed bool, err error) {
	if commit {
		if err = tp.cl.Flush(ctx); err != nil {
			err = commitNotSent{err}
		} else if err = tp.cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
			return true, nil
		}
	}
	aerr := tp.cl.AbortBufferedRecords(ctx)
	if aerr == nil {
		aerr = tp.cl.EndTransaction(ctx, kgo.TryAbort)
	}
	if err == nil {
		err = aerr
	}
	return false, err
}

// settle counts the end of the transaction begun at began and returns
// op's error: nil when it ended as asked (committed, or aborted when
// asked to abort); ErrTxnUnknown's when unknown (a commit unanswered).
func (tp *txnProducer) settle(op string, began time.Time, committed, wantCommit, unknown bool, cause metrics.TxnOutcome, err error) error {
	tp.began = time.Time{}
	d := time.Since(began)
	if committed {
		tp.stats.end(metrics.TxnCommitted, d)
		return nil
	}
	if err == nil && !wantCommit {
		tp.stats.end(cause, d)
		return nil
	}
	out := txnError(op, err, began, tp.s.txnTimeout, true)
	if unknown {
		out = fmt.Errorf("sdk: %s: %w: %w", op, ErrTxnUnknown, err)
	}
	switch {
	case errors.Is(out, ErrTxnFenced):
		cause = metrics.TxnFenced
	case errors.Is(out, ErrTxnRebalanced):
		cause = metrics.TxnRebalance
	case errors.Is(out, ErrTxnTimedOut):
		cause = metrics.TxnTimeout
	case wantCommit:
		cause = metrics.TxnFailed
	}
	tp.stats.end(cause, d)
	if err == nil {
		return nil
	}
	if unknown {
		tp.s.logger.Warn("azkafka: a transaction's commit got no answer from the cluster: it may have been committed", "op", op, "error", err,
			"fix", "what is left of it is aborted; a TxnWriter begins another; a Processor stops: close it and start another with the same transactional ID")
		return out
	}
	tp.s.logger.Warn("azkafka: a transaction was aborted", "op", op, "cause", cause, "error", err,
		"fix", "nothing of it is visible to read_committed readers; begin another (after ErrTxnFenced, close this instance)")
	return out
}

// Close aborts the open transaction, if any, within WriteTimeout, and
// closes the producer. It returns the abort's error, if any.
func (tp *txnProducer) Close() error {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.closed.Swap(true) {
		return nil
	}
	err := tp.abortAtCloseLocked()
	tp.cl.Close()
	tp.s.stop()
	return err
}

// abortAtCloseLocked aborts the open transaction, if any, within
// WriteTimeout, counting it as aborted by Close. tp.mu is held.
func (tp *txnProducer) abortAtCloseLocked() error {
	if tp.began.IsZero() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), tp.conf.writeTimeout)
	defer cancel()
	began := tp.began
	committed, err := tp.endTxn(ctx, kgo.TryAbort)
	return tp.settle("Close", began, committed, false, false, metrics.TxnClose, err)
}

// TxnStats are a TxnWriter's or a Processor's transactions since the
// previous call.
type TxnStats struct {
	Begun, Committed int64
	// Aborted counts aborted transactions by cause (metrics.TxnOutcome's
	// names): "abort" (Abort, or a Processor's function returned an
	// error), "rebalance", "timeout", "fenced", "failed" (a write or the
	// commit failed), "close".
	Aborted map[string]int64
	// Duration is from Begin to the end, committed or aborted.
	Duration kafka.DurationStats
	// Open: a transaction is open now.
	Open bool
	SDK  SDKStats
}

// Stats returns the transactions since the previous call.
func (tp *txnProducer) Stats() TxnStats {
	tp.mu.RLock()
	open := !tp.began.IsZero()
	tp.mu.RUnlock()
	st := TxnStats{
		Begun:     tp.stats.begun.Swap(0),
		Committed: tp.stats.ended[metrics.TxnCommitted].Swap(0),
		Aborted:   map[string]int64{},
		Duration:  durationStats(&tp.stats.duration),
		Open:      open,
		SDK:       tp.counters.snapshot(tp.s),
	}
	for o := metrics.TxnCommitted + 1; o <= metrics.TxnClose; o++ {
		if n := tp.stats.ended[o].Swap(0); n > 0 {
			st.Aborted[o.String()] = n
		}
	}
	return st
}

// txnCounters are the counts behind TxnStats, and the client's Recorder
// (nil without one).
type txnCounters struct {
	rec      metrics.Recorder
	begun    atomic.Int64
	ended    [metrics.TxnClose + 1]atomic.Int64 // by outcome
	duration summary[time.Duration]
}

func (c *txnCounters) begin() {
	c.begun.Add(1)
	if c.rec != nil {
		c.rec.TxnBegun()
	}
}

// end counts a transaction's end after d from its begin.
func (c *txnCounters) end(o metrics.TxnOutcome, d time.Duration) {
	c.duration.observe(d)
	c.ended[o].Add(1)
	if c.rec != nil {
		c.rec.TxnEnded(o, d)
	}
}

// balancerPartitioner is a kafka.Balancer as the engine's partitioner:
// it runs when the engine knows the topic's partition count.
type balancerPartitioner struct {
	mu    sync.Mutex
	b     kafka.Balancer
	parts []int
}

func (p *balancerPartitioner) ForTopic(string) kgo.TopicPartitioner { return p }

func (p *balancerPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (p *balancerPartitioner) Partition(r *kgo.Record, n int) int {
	if h, ok := p.b.(*kafka.Hash); ok && h.Hasher == nil && r.Key != nil {
		return hashPartition(r.Key, n)
	}
	m := kafka.Message{Topic: r.Topic, Key: r.Key, Value: r.Value, Time: r.Timestamp}
	if len(r.Headers) > 0 {
		m.Headers = make([]kafka.Header, len(r.Headers))
		for i, h := range r.Headers {
			m.Headers[i] = kafka.Header{Key: h.Key, Value: h.Value}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.parts) < n {
		p.parts = append(p.parts, len(p.parts))
	}
	if i := p.b.Balance(m, p.parts[:n]...); i >= 0 && i < n {
		return i
	}
	return 0
}

// hashPartition is kafka.Hash's partition of key among n (FNV-1a, the
// sign handled as Sarama does), without a kafka.Message, a pooled hasher
// and a lock per record.
func hashPartition(key []byte, n int) int {
	h := uint32(2166136261)
	for _, c := range key {
		h ^= uint32(c)
		h *= 16777619
	}
	i := int32(h) % int32(n)
	if i < 0 {
		i = -i
	}
	return int(i)
}
