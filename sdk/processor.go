package sdk

// processor.go holds Processor: consume-transform-produce exactly once
// (KIP-447), a consumer group's messages read and what is made of them
// written in transactions that also commit the group's offsets, on the
// engine's GroupTransactSession. It pairs with txn.go (the transactional
// producer, TxnStats) and engine.go (the options every client shares).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/metrics"
)

// Processor reads a consumer group's messages and writes what a program
// makes of them in transactions that also commit the group's offsets of
// the messages read (Kafka's exactly-once, KIP-98 and KIP-447): for each
// batch, the output messages and the input's offsets become visible
// together to read_committed readers, or neither does. After a crash, a
// rebalance or a failed commit the batch is read again from the group's
// committed offsets, and what its aborted transaction wrote is never seen
// by read_committed readers: each input message's output is committed
// once. Effects outside Kafka (a database write, an HTTP call) are not
// covered: they may run again for a batch read again.
//
// Run is the loop most programs need:
//
//	p, err := sdk.NewProcessor(kafka.ReaderConfig{Brokers: brokers, GroupID: "billing", Topic: "orders"},
//		&kafka.Writer{Topic: "invoices", Balancer: &kafka.Hash{}}, sdk.WithTransactionalID(podName))
//	...
//	err = p.Run(ctx, func(ctx context.Context, in []kafka.Message, out sdk.MessageWriter) error {
//		for _, m := range in {
//			if err := out.WriteMessages(ctx, kafka.Message{Key: m.Key, Value: invoice(m.Value)}); err != nil {
//				return err
//			}
//		}
//		return nil
//	})
//
// FetchMessages, WriteMessages, Commit and Abort are the steps Run takes,
// for programs that need them: FetchMessages begins a transaction when
// none is open; Commit ends it, or aborts it with an error matching
// ErrTxnRebalanced when the group rebalanced since (the batch goes to the
// partitions' owner, which reads it again).
//
// The kafka.ReaderConfig gives the input: Brokers, GroupID (required),
// Topic or GroupTopics, StartOffset, MinBytes, MaxBytes, MaxWait,
// SessionTimeout, RebalanceTimeout, HeartbeatInterval, GroupBalancers
// (kafka.RangeGroupBalancer, kafka.RoundRobinGroupBalancer and
// CooperativeStickyGroupBalancer; others are refused) and Dialer (TLS,
// SASL, when the Writer has no Transport). Input is always read
// read_committed, so that a chain of processors stays exactly once. The
// kafka.Writer gives the output as for a TxnWriter (Addr defaults to the
// Brokers). The transactional ID (WithTransactionalID,
// $AZKAFKA_TRANSACTIONAL_ID) is best one per instance and kept across its
// restarts, e.g. the pod name: a restarted instance then aborts at once
// what the crashed one left open, where an instance with a new ID (the
// default: the group ID and a random suffix) leaves it to the
// transaction timeout, holding read_committed readers of those partitions
// back until then. A zombie (an instance paused while the group moved its
// partitions) is fenced by the group's generation: its commit fails.
//
// Do not end a transaction from a rebalance callback (none is offered
// here); a Processor is used by one goroutine at a time.
type Processor struct {
	*txnProducer
	sess  *kgo.GroupTransactSession
	group string
	// pollMu is held while FetchMessages polls; Close cancels the poll
	// (pollCancel) and takes pollMu before it ends the transaction: the
	// engine's session must not end one while it polls.
	pollMu     sync.Mutex
	cancelMu   sync.Mutex
	pollCancel context.CancelFunc
	// endCancel ends the commit or abort Run is making (under cancelMu).
	endCancel context.CancelFunc
	// stopped is FetchMessages' error once a commit got no answer
	// (ErrTxnUnknown).
	stopped atomic.Pointer[error]
}

// MessageWriter writes messages; a Processor is one, writing in its open
// transaction.
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// NewProcessor returns a Processor reading in and writing with out's
// configuration (see Processor). It fails, naming the field, for an
// invalid configuration, option or AZKAFKA_* variable.
func NewProcessor(in kafka.ReaderConfig, out *kafka.Writer, opts ...Option) (*Processor, error) {
	if in.GroupID == "" {
		return nil, errors.New("sdk: NewProcessor: kafka.ReaderConfig.GroupID is empty: a Processor commits a group's offsets")
	}
	if in.Topic == "" && len(in.GroupTopics) == 0 {
		return nil, errors.New("sdk: NewProcessor: kafka.ReaderConfig has no Topic nor GroupTopics")
	}
	if out == nil {
		out = &kafka.Writer{}
	}
	// The configuration only (a kafka.Writer holds locks: not copied).
	kw := kafka.Writer{Addr: out.Addr, Topic: out.Topic, Balancer: out.Balancer, Compression: out.Compression,
		BatchBytes: out.BatchBytes, WriteTimeout: out.WriteTimeout, ReadTimeout: out.ReadTimeout, Async: out.Async,
		AllowAutoTopicCreation: out.AllowAutoTopicCreation, Transport: out.Transport, Logger: out.Logger, ErrorLogger: out.ErrorLogger}
	if kw.Addr == nil && len(in.Brokers) > 0 {
		kw.Addr = kafka.TCP(in.Brokers...)
	}
	var shown kafka.ReaderConfig
	if err := readerDefaults(&in, &shown); err != nil {
		return nil, fmt.Errorf("sdk: NewProcessor: invalid kafka.ReaderConfig: %w", err)
	}
	if kw.Transport == nil {
		opts = withBaseDialer(in.Dialer, opts)
	}
	opts = append([]Option{withDefaultTxnID(in.GroupID)}, opts...)
	tp, err := newTxnProducer("NewProcessor", ctorProcessor, &kw, opts, func(s *session, h *engineHooks) ([]kgo.Opt, error) {
		return processorGroupOpts(in, s)
	})
	if err != nil {
		return nil, err
	}
	sess, err := kgo.NewGroupTransactSession(tp.kopts...)
	if err != nil {
		tp.s.stop()
		return nil, inCtor("NewProcessor", err)
	}
	tp.cl = sess.Client()
	tp.s.engineUp(tp.hooks)
	p := &Processor{txnProducer: tp, sess: sess, group: in.GroupID}
	tp.endTxn = p.endSession
	return p, nil
}

// withDefaultTxnID is the transactional ID of a Processor given none: the
// group ID and a random suffix. The options and $AZKAFKA_TRANSACTIONAL_ID
// win.
func withDefaultTxnID(group string) Option {
	return set("withDefaultTxnID", func(c *config) {
		id := group + "-" + uuid.NewString()
		if validInstanceID(id) != nil {
			id = "azkafka-" + uuid.NewString() // a group ID no transactional ID may hold
		}
		c.txnID = id
	})
}

// processorGroupOpts are the engine's consumer options for in.
func processorGroupOpts(in kafka.ReaderConfig, s *session) ([]kgo.Opt, error) {
	topics := in.GroupTopics
	if len(topics) == 0 {
		topics = []string{in.Topic}
	}
	start := kgo.NewOffset().AtStart()
	if in.StartOffset == kafka.LastOffset {
		start = kgo.NewOffset().AtEnd()
	}
	fetchMax := readerFetchMax(in)
	opts := []kgo.Opt{
		kgo.ConsumerGroup(in.GroupID),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeStartOffset(start),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(in.SessionTimeout),
		kgo.RebalanceTimeout(in.RebalanceTimeout),
		kgo.HeartbeatInterval(in.HeartbeatInterval),
		kgo.FetchMaxWait(in.MaxWait),
		kgo.FetchMinBytes(int32(in.MinBytes)),
		kgo.FetchMaxPartitionBytes(int32(in.MaxBytes)),
		kgo.FetchMaxBytes(int32(fetchMax)),
	}
	if s.instanceID != "" {
		opts = append(opts, kgo.InstanceID(s.instanceID))
	}
	if s.groupProtocol == GroupProtocolConsumer {
		return append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer()), nil
	}
	bs := make([]kgo.GroupBalancer, 0, len(in.GroupBalancers))
	for _, b := range in.GroupBalancers {
		switch b.(type) {
		case kafka.RangeGroupBalancer, *kafka.RangeGroupBalancer:
			bs = append(bs, kgo.RangeBalancer())
		case kafka.RoundRobinGroupBalancer, *kafka.RoundRobinGroupBalancer:
			bs = append(bs, kgo.RoundRobinBalancer())
		case CooperativeStickyGroupBalancer, *CooperativeStickyGroupBalancer:
			bs = append(bs, kgo.CooperativeStickyBalancer())
		default:
			return nil, fmt.Errorf("kafka.ReaderConfig.GroupBalancers: %T is not supported by a Processor: use kafka.RangeGroupBalancer, kafka.RoundRobinGroupBalancer or sdk.CooperativeStickyGroupBalancer", b)
		}
	}
	return append(opts, kgo.Balancers(bs...)), nil
}

// FetchMessages returns the next messages of the Processor's partitions,
// at most max (0: what the engine has buffered), waiting until one came or
// ctx ended (ctx's error), and begins a transaction when none is open: the
// messages' offsets are committed with it. Partition errors the engine
// retries are absorbed; io.ErrClosedPipe after Close.
func (p *Processor) FetchMessages(ctx context.Context, max int) ([]kafka.Message, error) {
	mark := p.hooks.errSeq.Load()
	if err := p.stopped.Load(); err != nil {
		return nil, *err
	}
	for failed := 0; ; {
		if p.closed.Load() {
			return nil, io.ErrClosedPipe
		}
		if max <= 0 {
			max = -1
		}
		fs := p.poll(ctx, max)
		if fs.IsClientClosed() {
			return nil, io.ErrClosedPipe
		}
		if ctx.Err() != nil {
			return nil, newCtxError(ctx, p.hooks.since(mark))
		}
		errs := 0
		fs.EachError(func(topic string, partition int32, err error) {
			errs++
			p.counters.retries.Add(1)
			p.hooks.noteError(fmt.Errorf("fetching %s[%d]: %w", topic, partition, err))
		})
		if fs.NumRecords() == 0 {
			if errs > 0 {
				// The engine returns errors at once: wait before the
				// next poll instead of spinning.
				if p.s.retry.Sleep(ctx, failed) != nil {
					return nil, newCtxError(ctx, p.hooks.since(mark))
				}
				failed++
			}
			continue
		}
		p.mu.RLock()
		open := !p.began.IsZero()
		p.mu.RUnlock()
		if !open {
			if err := p.Begin(); err != nil {
				return nil, err
			}
		}
		msgs := make([]kafka.Message, 0, fs.NumRecords())
		fs.EachPartition(func(ft kgo.FetchTopicPartition) {
			for _, r := range ft.Records {
				msgs = append(msgs, message(fetched{rec: r, hwm: ft.HighWatermark}))
			}
		})
		return msgs, nil
	}
}

// poll polls the engine's session, unless Close has begun.
func (p *Processor) poll(ctx context.Context, max int) kgo.Fetches {
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.cancelMu.Lock()
	if p.closed.Load() {
		p.cancelMu.Unlock()
		return kgo.NewErrFetch(kgo.ErrClientClosed)
	}
	p.pollCancel = cancel
	p.cancelMu.Unlock()
	return p.sess.PollRecords(ctx, max)
}

// Commit ends the open transaction: the messages written in it and the
// offsets of the messages FetchMessages returned in it are committed
// together. When the group rebalanced since it began, or a write or the
// commit failed, it is aborted instead, and the error matches
// ErrTxnAborted (ErrTxnRebalanced for a rebalance): the messages are read
// again from the group's committed offsets, by this Processor or the
// partitions' new owner. ErrTxnFenced: this instance is a zombie; Close it.
// ErrTxnUnknown: the commit got no answer; the Processor stops (its
// FetchMessages returns the error): Close it and start another.
func (p *Processor) Commit(ctx context.Context) error {
	err := p.end(ctx, kgo.TryCommit, metrics.TxnAbort)
	if errors.Is(err, ErrTxnUnknown) {
		// The engine's session has gone back to the offsets it knows
		// were committed, which the unanswered commit may have moved:
		// reading on could read its input again. Stop instead.
		stop := fmt.Errorf("sdk: FetchMessages: the Processor stopped after a commit got no answer (close it and start another with the same transactional ID): %w", err)
		p.stopped.CompareAndSwap(nil, &stop)
	}
	return err
}

// Abort aborts the open transaction: nothing written in it becomes
// visible, and its messages are read again from the group's committed
// offsets.
func (p *Processor) Abort(ctx context.Context) error {
	return p.end(ctx, kgo.TryAbort, metrics.TxnAbort)
}

// runEnd is Run's commit or abort: not ended with ctx (a transaction
// begun is ended), but by Close.
func (p *Processor) runEnd(ctx context.Context, end func(context.Context) error) error {
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer p.warnSlowEnd(time.Now())()
	p.cancelMu.Lock()
	if p.closed.Load() {
		p.cancelMu.Unlock()
		return io.ErrClosedPipe
	}
	p.endCancel = cancel
	p.cancelMu.Unlock()
	defer func() {
		p.cancelMu.Lock()
		p.endCancel = nil
		p.cancelMu.Unlock()
	}()
	return end(ectx)
}

// warnSlowEnd logs a warning each WriteTimeout that Run's commit or abort,
// begun at start, goes on (the engine retries it while the coordinator
// answers CONCURRENT_TRANSACTIONS or not at all, with no end of its own),
// until the returned stop is called.
func (p *Processor) warnSlowEnd(start time.Time) (stop func()) {
	every := max(p.conf.writeTimeout, time.Second)
	var mu sync.Mutex
	done := false
	var t *time.Timer
	mu.Lock() // the first warning waits for t
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		p.s.logger.Warn("azkafka: a transaction's end is still waiting for the transaction coordinator",
			"transactional_id", p.s.txnID, "group", p.group, "waited", time.Since(start).Round(time.Millisecond),
			"fix", "Run retries it until the coordinator answers; a coordinator answering CONCURRENT_TRANSACTIONS for long holds a transaction of this ID open (kafka-transactions.sh describe); Close ends the wait")
		t.Reset(every)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
		t.Stop()
	}
}

// endSession ends the open transaction through the group session, which
// aborts it when the group rebalanced since it began.
func (p *Processor) endSession(ctx context.Context, commit kgo.TransactionEndTry) (bool, error) {
	committed, err := p.sess.End(ctx, commit)
	if bool(commit) && !committed && err == nil {
		err = ErrTxnRebalanced
	}
	return committed, err
}

// Run reads batches and calls fn with each, in a transaction: fn writes
// its output with out.WriteMessages; when fn returns nil, the output and
// the batch's offsets are committed together. When fn returns an error,
// the transaction is aborted and Run returns fn's error. A transaction
// aborted by a rebalance, or by a failed write or commit, is not the end:
// the batch is read again and Run goes on, waiting the retry policy's
// backoff after failures (WithRetry), until MaxAttempts of them in a row,
// when it returns the last. Run returns nil when ctx ends, and at once on
// ErrTxnFenced and ErrTxnUnsupported. Messages come at most 10,000 at a
// time. It returns at once on ErrTxnUnknown too: a commit got no answer,
// and the Processor stopped (start another). A commit or abort the
// coordinator keeps refusing with CONCURRENT_TRANSACTIONS has no end of
// its own: Run logs a warning each WriteTimeout it waits, and Close ends
// it.
func (p *Processor) Run(ctx context.Context, fn func(ctx context.Context, in []kafka.Message, out MessageWriter) error) error {
	failures := 0
	for {
		msgs, err := p.FetchMessages(ctx, 10000)
		if err != nil {
			if ctx.Err() != nil {
				p.abortOpen()
				return nil
			}
			return err
		}
		if err := fn(ctx, msgs, p); err != nil {
			if aerr := p.runEnd(ctx, p.Abort); aerr != nil && !errors.Is(aerr, ErrNoTxn) {
				return errors.Join(err, aerr)
			}
			return err
		}
		err = p.runEnd(ctx, p.Commit)
		if err != nil && p.closed.Load() {
			return io.ErrClosedPipe
		}
		switch {
		case err == nil, errors.Is(err, ErrTxnRebalanced):
			failures = 0
			continue
		case errors.Is(err, ErrTxnFenced), errors.Is(err, ErrTxnUnsupported), errors.Is(err, ErrTxnUnknown), errors.Is(err, io.ErrClosedPipe):
			return err
		}
		failures++
		if failures >= p.s.retry.Attempts() {
			return err
		}
		if p.s.retry.Sleep(ctx, failures-1) != nil {
			return nil
		}
	}
}

// abortOpen aborts the open transaction, if any, within WriteTimeout.
func (p *Processor) abortOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), p.conf.writeTimeout)
	defer cancel()
	if err := p.Abort(ctx); err != nil && !errors.Is(err, ErrNoTxn) {
		p.s.logger.Warn("azkafka: aborting the open transaction failed; the cluster aborts it after the transaction timeout", "error", err)
	}
}

// Close aborts the open transaction, if any, leaves the group and closes
// the Processor, within WriteTimeout plus ReaderCloseTimeout, also while
// Run's commit is being retried (Close ends it); it returns the abort's
// error, if any. A Run in progress returns io.ErrClosedPipe. A Commit or
// Abort of the caller's own is waited for: its ctx bounds it.
func (p *Processor) Close() error {
	// Closed first: no poll starts after the abort, and no transaction
	// begins (Begin checks it under mu, which the abort below takes
	// after it: a transaction begun before is aborted). The poll in
	// progress is ended and waited for, and Run's end in progress is
	// ended: an end the engine retries without a bound (a coordinator
	// answering CONCURRENT_TRANSACTIONS) holds mu.
	p.cancelMu.Lock()
	already := p.closed.Swap(true)
	if cancel := p.pollCancel; cancel != nil {
		cancel()
	}
	if cancel := p.endCancel; cancel != nil {
		cancel()
	}
	p.cancelMu.Unlock()
	if already {
		return nil
	}
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	p.mu.Lock()
	err := p.abortAtCloseLocked()
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.sess.Close()
		close(done)
	}()
	t := time.NewTimer(ReaderCloseTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.s.logger.Warn("azkafka: Processor.Close returned before the engine closed: the cluster did not answer in time",
			"bound", ReaderCloseTimeout, "group", p.group, "cause", p.hooks.since(0))
	}
	p.s.stop()
	return err
}
