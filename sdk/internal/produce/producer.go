package produce

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
	metaAPI "github.com/segmentio/kafka-go/protocol/metadata"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"

	"github.com/azkafka/azkafka/retry"
)

// Config configures a Producer.
type Config struct {
	// Transport sends the requests; it must not be nil. kafka-go's
	// Transport routes each Produce request to the leader of its
	// partitions as its cached metadata knows it.
	Transport kafka.RoundTripper
	// Addr is the cluster's bootstrap address.
	Addr net.Addr
	// Compression of the record batches. Default: none.
	Compression compress.Compression
	// Timeout is the Produce request's timeout, which the broker applies
	// to replication. The client waits for each answer that long and a
	// margin (up to 2s) more before it counts the attempt as timed out.
	// Default: 10s.
	Timeout time.Duration
	// Policy bounds the attempts of a batch and spaces them. Default: the
	// zero retry.Policy.
	Policy retry.Policy
	// Rediscover, when set, runs before every resend round so that the
	// Transport fetches fresh metadata (the leader may have moved); stale
	// says the previous round proved the metadata wrong or missing (no
	// metadata at all, or a broker answering that it does not lead the
	// partition), so a fresh fetch is needed now.
	Rediscover func(stale bool)
	// Now returns the time stamped on records that have none. Default:
	// time.Now.
	Now func() time.Time
}

// Batch is the messages of one partition that are produced together, and,
// after Producer.Produce, their outcome.
type Batch struct {
	Topic     string
	Partition int
	Messages  []kafka.Message

	// Err is nil when the broker stored the batch (now or on an earlier
	// attempt). Otherwise none of the batch was stored, or, when
	// Ambiguous, the batch may have been stored once.
	Err error
	// Ambiguous reports that Err came after an attempt whose outcome is
	// unknown (a connection lost after the request was written).
	Ambiguous bool
	// BaseOffset is the offset of the first message when known, else -1.
	BaseOffset int64
	// Attempts is the number of Produce requests that carried the batch.
	Attempts int

	buf       []byte // the record set, size prefix included
	head      Header
	part      *partition
	unknown   bool // an attempt's outcome is unknown
	retryErr  error
	done      bool
	reported  bool // done, its partition freed and onDone called
	onDone    func(*Batch)
	bumpsLeft int
}

// Bytes is the size of the encoded record set, once produced.
func (b *Batch) Bytes() int { return len(b.buf) }

// Release hands b's encoded bytes back for reuse by later batches; b must
// not be produced again.
func (b *Batch) Release() {
	if b.buf != nil && cap(b.buf) <= maxPooled {
		buf := b.buf[:0]
		bufferPool.Put(&buf)
	}
	b.buf = nil
}

// maxPooled bounds the buffers kept for reuse, so that one huge batch does
// not pin its memory.
const maxPooled = 4 << 20

var bufferPool sync.Pool

// getBuffer returns an empty buffer that holds msgs as a batch without
// growing (uncompressed).
func getBuffer(msgs []kafka.Message) []byte {
	size := BatchOverhead
	for i := range msgs {
		size += RecordSize(&msgs[i])
	}
	if v, ok := bufferPool.Get().(*[]byte); ok && cap(*v) >= size {
		return (*v)[:0]
	}
	return make([]byte, 0, size)
}

// partition is the producer state of one topic partition. Its mutex is
// held while a batch of the partition is in flight, which keeps one batch
// in flight per partition: batches are stored in the order they are
// produced, and a resend can never land after a later batch.
type partition struct {
	mu    sync.Mutex
	id    producerID // the ID and epoch next counts under
	next  int32      // sequence of the next batch
	reset bool       // next is unknown: move to a new epoch first
}

type producerID struct {
	id    int64
	epoch int16
}

type topicPartition struct {
	topic     string
	partition int
}

// Stats are a Producer's counters.
type Stats struct {
	ProducerID    int64 // -1 before InitProducerId succeeded
	ProducerEpoch int16
	// EpochBumps counts epoch bumps, new producer IDs included.
	EpochBumps int64
	// DuplicateBatches counts batches acknowledged on a resend after an
	// attempt whose outcome was unknown, or answered
	// DUPLICATE_SEQUENCE_NUMBER: the batches that a producer without
	// idempotence would have risked storing twice.
	DuplicateBatches int64
	// BatchesResent counts resends of a batch, of any cause, and
	// MessagesResent the messages they carried.
	BatchesResent, MessagesResent int64
	// Rounds counts resend rounds: the times a Produce call sent again
	// the batches that had failed.
	Rounds int64
	// Requests, Messages and Bytes count Produce requests sent and the
	// messages and record-set bytes they carried, every attempt included
	// (as kafka-go's Writer counts).
	Requests, Messages, Bytes int64
}

// Producer produces batches idempotently. It is safe for concurrent use.
type Producer struct {
	cfg Config

	idMu     sync.Mutex
	id       producerID
	idSet    bool
	fenced   bool          // a broker holds a newer epoch of id: the next bump takes a new ID
	initLock chan struct{} // held while InitProducerId is in flight

	partsMu sync.Mutex
	parts   map[topicPartition]*partition

	bumps, dups, resent, msgsResent, rounds, requests, messages, bytes atomic.Int64
}

// New returns a Producer; it asks for its producer ID on first use (or
// Init).
func New(cfg Config) *Producer {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Producer{cfg: cfg, parts: make(map[topicPartition]*partition), id: producerID{-1, -1}, initLock: make(chan struct{}, 1)}
}

// InitError is the error of an InitProducerId request: the cluster gave
// the producer no ID, so nothing can be produced idempotently.
type InitError struct{ Err error }

func (e *InitError) Error() string {
	return "InitProducerId: " + e.Err.Error()
}

func (e *InitError) Unwrap() error { return e.Err }

// Init asks the cluster for a producer ID unless the Producer has one.
// The error is an *InitError.
func (p *Producer) Init(ctx context.Context) error {
	p.idMu.Lock()
	set := p.idSet
	p.idMu.Unlock()
	if set {
		return nil
	}
	// One request at a time; the others wait for it, or for their ctx.
	select {
	case p.initLock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.initLock }()
	p.idMu.Lock()
	set = p.idSet
	p.idMu.Unlock()
	if set {
		return nil
	}
	id, err := p.initProducerID(ctx)
	if err != nil {
		return err
	}
	p.idMu.Lock()
	p.id, p.idSet = id, true
	p.idMu.Unlock()
	return nil
}

func (p *Producer) initProducerID(ctx context.Context) (producerID, error) {
	c := kafka.Client{Addr: p.cfg.Addr, Transport: p.cfg.Transport}
	res, err := c.InitProducerID(ctx, &kafka.InitProducerIDRequest{Addr: p.cfg.Addr, ProducerID: -1, ProducerEpoch: -1})
	if err != nil {
		return producerID{}, &InitError{err}
	}
	if res.Error != nil {
		return producerID{}, &InitError{res.Error}
	}
	return producerID{int64(res.Producer.ProducerID), int16(res.Producer.ProducerEpoch)}, nil
}

// bump moves the producer from epoch from to the next epoch, unless
// another partition did already, and returns the current ID and epoch.
// Idempotent producers bump their epoch themselves (KIP-360): a broker
// accepts a higher epoch for a producer ID when its sequence starts at 0.
// At the last epoch, or once a broker fenced the current one, the
// producer asks for a new producer ID instead.
func (p *Producer) bump(ctx context.Context, from producerID) (producerID, error) {
	p.idMu.Lock()
	if p.id != from {
		defer p.idMu.Unlock()
		return p.id, nil
	}
	if p.id.epoch < math.MaxInt16 && !p.fenced {
		defer p.idMu.Unlock()
		p.id.epoch++
		p.bumps.Add(1)
		return p.id, nil
	}
	p.idMu.Unlock()
	// A new producer ID: one request at a time, without holding idMu
	// (Stats and other partitions' sequence stay free), each attempt
	// bounded like a produce attempt.
	select {
	case p.initLock <- struct{}{}:
	case <-ctx.Done():
		return p.current(), ctx.Err()
	}
	defer func() { <-p.initLock }()
	if cur := p.current(); cur != from {
		return cur, nil // another partition got it meanwhile
	}
	actx, cancel := context.WithTimeoutCause(ctx, p.attemptTimeout(), errAttemptTimeout)
	defer cancel()
	id, err := p.initProducerID(actx)
	if err != nil {
		return p.current(), err
	}
	p.idMu.Lock()
	defer p.idMu.Unlock()
	p.id, p.fenced = id, false
	p.bumps.Add(1)
	return p.id, nil
}

func (p *Producer) current() producerID {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	return p.id
}

// Stats returns the Producer's counters, cumulative since New.
func (p *Producer) Stats() Stats {
	id := p.current()
	return Stats{
		ProducerID:       id.id,
		ProducerEpoch:    id.epoch,
		EpochBumps:       p.bumps.Load(),
		DuplicateBatches: p.dups.Load(),
		BatchesResent:    p.resent.Load(),
		MessagesResent:   p.msgsResent.Load(),
		Rounds:           p.rounds.Load(),
		Requests:         p.requests.Load(),
		Messages:         p.messages.Load(),
		Bytes:            p.bytes.Load(),
	}
}

func (p *Producer) partition(topic string, part int) *partition {
	k := topicPartition{topic, part}
	p.partsMu.Lock()
	defer p.partsMu.Unlock()
	s := p.parts[k]
	if s == nil {
		s = &partition{id: producerID{-1, -1}}
		p.parts[k] = s
	}
	return s
}

// Produce sends batches, at most one per partition, and fills in their
// outcome. Batches of different partitions that share a leader travel in
// one Produce request. Each batch is resent, as the same bytes, after a
// transient error until it is acknowledged, the policy's attempts run out
// or ctx is done; it waits until no other batch of its partition is in
// flight.
//
// The error is not nil only when no batch could be sent at all: the
// producer has no ID (an *InitError) or ctx ended while waiting for it.
func (p *Producer) Produce(ctx context.Context, batches []*Batch) error {
	return p.ProduceEach(ctx, batches, nil)
}

// ProduceEach is Produce that also calls done, when not nil, for each
// batch as soon as its outcome is filled in, while other batches may
// still be in flight; done runs once per batch, on any goroutine, and
// not at all when the error is not nil. Once done runs, the batch's
// partition is free for the next batch.
func (p *Producer) ProduceEach(ctx context.Context, batches []*Batch, done func(*Batch)) error {
	if err := p.Init(ctx); err != nil {
		return err
	}
	batches = slices.Clone(batches) // the caller's order stays
	slices.SortFunc(batches, func(a, b *Batch) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for i, b := range batches {
		if i > 0 && b.Topic == batches[i-1].Topic && b.Partition == batches[i-1].Partition {
			return fmt.Errorf("produce: two batches for %s/%d", b.Topic, b.Partition)
		}
	}
	// Lock in a fixed order: concurrent calls never wait on each other in
	// a cycle.
	for _, b := range batches {
		b.part = p.partition(b.Topic, b.Partition)
		b.part.mu.Lock()
		b.onDone, b.reported = done, false
	}
	defer func() {
		for _, b := range batches {
			if !b.reported {
				b.part.mu.Unlock()
			}
		}
	}()
	for _, b := range batches {
		b.BaseOffset, b.Err, b.Ambiguous, b.Attempts, b.done, b.unknown = -1, nil, false, 0, false, false
		b.bumpsLeft = 2
		if err := p.sequence(ctx, b); err != nil {
			b.Err, b.done = err, true
			continue
		}
		if b.buf == nil {
			b.buf = getBuffer(b.Messages)
		}
		buf, err := AppendBatch(b.buf[:0], b.head, b.Messages, p.cfg.Compression, p.cfg.Now())
		if err != nil {
			b.Err, b.done = err, true
			continue
		}
		b.buf = buf
	}
	pending := make([]*Batch, 0, len(batches))
	attempts := p.cfg.Policy.Attempts()
	stale := false
	for round := 0; ; round++ {
		p.finish(batches)
		pending = pending[:0]
		for _, b := range batches {
			if b.done {
				continue
			}
			// A batch has had its attempts when it was sent that many
			// times. Rounds in which it could not be sent (no metadata,
			// no connection to its leader) count up to maxRounds, so that
			// an unreachable cluster still ends the call.
			if round > 0 && (b.Attempts >= attempts || round >= maxRounds*attempts) {
				p.fail(b, fmt.Errorf("produce: gave up after %d attempts: %w", b.Attempts, b.retryErr))
				continue
			}
			pending = append(pending, b)
		}
		if len(pending) == 0 {
			p.finish(batches)
			return nil
		}
		if round > 0 {
			if err := p.cfg.Policy.Sleep(ctx, round-1); err != nil {
				for _, b := range pending {
					p.fail(b, fmt.Errorf("%w (not resent: %w)", b.retryErr, err))
				}
				p.finish(batches)
				return nil
			}
			if p.cfg.Rediscover != nil {
				p.cfg.Rediscover(stale)
			}
			p.rounds.Add(1)
			for _, b := range pending {
				if b.Attempts > 0 {
					p.resent.Add(1)
					p.msgsResent.Add(int64(len(b.Messages)))
				}
			}
		}
		if err := ctx.Err(); err != nil {
			// Never send once the caller gave up: a batch not sent now
			// was not stored by this call (unless an earlier attempt's
			// outcome is unknown, which fail reports).
			for _, b := range pending {
				cause := err
				if b.retryErr != nil {
					cause = fmt.Errorf("%w (not resent: %w)", b.retryErr, err)
				}
				p.fail(b, cause)
			}
			p.finish(batches)
			return nil
		}
		stale = p.send(ctx, pending)
	}
}

// maxRounds bounds, in multiples of the policy's attempts, the rounds of
// one Produce call.
const maxRounds = 3

// sequence stamps b with its partition's producer ID, epoch and next
// sequence, moving the partition to the current epoch, or to a new one when
// its sequence is unknown.
func (p *Producer) sequence(ctx context.Context, b *Batch) error {
	s := b.part
	cur := p.current()
	if s.reset && s.id == cur {
		var err error
		if cur, err = p.bump(ctx, cur); err != nil {
			return err
		}
	}
	if s.id != cur {
		s.id, s.next, s.reset = cur, 0, false
	}
	b.head = Header{ProducerID: s.id.id, ProducerEpoch: s.id.epoch, BaseSequence: s.next}
	return nil
}

// fail ends b with err. A batch whose outcome is unknown may be stored:
// its partition moves to a new epoch before its next batch, so that the
// sequence is never reused for other records.
func (p *Producer) fail(b *Batch, err error) {
	b.Err, b.done, b.Ambiguous = err, true, b.unknown
	if b.unknown {
		b.part.reset = true
	}
}

// succeed ends b as stored at offset.
func (p *Producer) succeed(b *Batch, offset int64, duplicate bool) {
	b.Err, b.done, b.BaseOffset = nil, true, offset
	s := b.part
	n := int32(len(b.Messages))
	if s.next > math.MaxInt32-n {
		s.next = n - (math.MaxInt32 - s.next) - 1 // sequences wrap to 0
	} else {
		s.next += n
	}
	if duplicate || b.unknown {
		p.dups.Add(1)
	}
}

// attemptMargin is how much longer the client waits for a Produce answer
// than the timeout the request gives the broker, so that a broker that
// answers at its timeout is heard.
const attemptMargin = 2 * time.Second

// attemptTimeout bounds one attempt: the broker's timeout and a margin.
func (p *Producer) attemptTimeout() time.Duration {
	return p.cfg.Timeout + min(attemptMargin, p.cfg.Timeout)
}

// attemptTimedOut reports whether err ended an attempt, bounded by ctx
// (deadline) within parent, because the attempt's time ran out, not the
// caller's. kafka-go sets the socket deadline to ctx's, so the socket's
// i/o timeout may come back before ctx's own timer fired.
func attemptTimedOut(parent, ctx context.Context, err error, deadline time.Time) bool {
	if parent.Err() != nil {
		return false
	}
	return ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(deadline)
}

// errAttemptTimeout is the error of an attempt that got no answer within
// Config.Timeout: its outcome is unknown, and a resend is safe.
var errAttemptTimeout = errors.New("produce: no answer within the request timeout")

// send makes one attempt for every batch of pending: one request per
// leader, in parallel, each bounded by Config.Timeout and a margin (as kafka-go bounds
// each produce by WriteTimeout), so that a connection that went silent
// costs an attempt, not the caller's whole deadline.
// It reports whether the round proved the Transport's metadata stale: the
// lookup failed, or a broker refused a batch as not the leader.
func (p *Producer) send(parent context.Context, pending []*Batch) (stale bool) {
	deadline := time.Now().Add(p.attemptTimeout())
	ctx, cancel := context.WithDeadlineCause(parent, deadline, errAttemptTimeout)
	defer cancel()
	groups, lookupErr := p.byLeader(ctx, pending)
	if lookupErr != nil && attemptTimedOut(parent, ctx, lookupErr, deadline) {
		lookupErr = fmt.Errorf("%w: %w", errAttemptTimeout, lookupErr)
	}
	if lookupErr != nil {
		lookupErr = fmt.Errorf("produce: looking up leaders: %w", lookupErr)
		for _, b := range pending {
			p.retryOrFail(b, lookupErr, false)
		}
		return true
	}
	var wg sync.WaitGroup
	var staleLeader atomic.Bool
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.sendOne(parent, ctx, deadline, g) {
				staleLeader.Store(true)
			}
		}()
	}
	wg.Wait()
	return staleLeader.Load()
}

// byLeader groups batches by the leader kafka-go's Transport would send
// them to. Batches whose partition is unknown or has no leader form
// groups of their own, which fail with kafka-go's routing error and are
// retried.
func (p *Producer) byLeader(ctx context.Context, batches []*Batch) ([][]*Batch, error) {
	var topics []string
	for _, b := range batches {
		if !slices.Contains(topics, b.Topic) {
			topics = append(topics, b.Topic)
		}
	}
	r, err := p.cfg.Transport.RoundTrip(ctx, p.cfg.Addr, &metaAPI.Request{TopicNames: topics})
	if err != nil {
		return nil, err
	}
	leaders := make(map[topicPartition]int32)
	for _, t := range r.(*metaAPI.Response).Topics {
		for _, pt := range t.Partitions {
			leaders[topicPartition{t.Name, int(pt.PartitionIndex)}] = pt.LeaderID
		}
	}
	byID := make(map[int32]int)
	var groups [][]*Batch
	for _, b := range batches {
		leader, ok := leaders[topicPartition{b.Topic, b.Partition}]
		if !ok || leader < 0 {
			groups = append(groups, []*Batch{b})
			continue
		}
		i, ok := byID[leader]
		if !ok {
			i = len(groups)
			byID[leader] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], b)
	}
	return groups, nil
}

// sendOne sends batches, all led by one broker, in one Produce request.
// It reports whether the answer shows the metadata stale (a partition
// not led by that broker, or kafka-go unable to route the request).
func (p *Producer) sendOne(parent, ctx context.Context, deadline time.Time, batches []*Batch) (stale bool) {
	req := &rawproduce.Request{Acks: int16(kafka.RequireAll), Timeout: int32(p.cfg.Timeout / time.Millisecond)}
	for _, b := range batches {
		b.Attempts++
		p.messages.Add(int64(len(b.Messages)))
		p.bytes.Add(int64(len(b.buf)))
		rp := rawproduce.RequestPartition{
			Partition: int32(b.Partition),
			RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(b.buf)},
		}
		if n := len(req.Topics); n > 0 && req.Topics[n-1].Topic == b.Topic {
			req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, rp)
		} else {
			req.Topics = append(req.Topics, rawproduce.RequestTopic{Topic: b.Topic, Partitions: []rawproduce.RequestPartition{rp}})
		}
	}
	p.requests.Add(1)
	r, err := p.cfg.Transport.RoundTrip(ctx, p.cfg.Addr, req)
	if err != nil {
		// kafka-go refused to route the request (its metadata changed
		// since byLeader, or it has no connection pool for the leader
		// yet): nothing was sent. Anything else may have reached the
		// broker.
		var routing *rawproduce.Error
		if errors.As(err, &routing) || errors.Is(err, kafka.BrokerNotAvailable) {
			for _, b := range batches {
				b.retryErr = err // retried on fresh metadata
			}
			return true
		}
		// kafka-go returns on a done ctx or a failed connection while
		// its connection goroutine may still be encoding the request
		// from b.buf (seen under the race detector with connections
		// closed mid-request): leave that buffer to it, and keep a copy,
		// so that neither a new header nor Release touches bytes still
		// being read.
		for _, b := range batches {
			b.buf = bytes.Clone(b.buf)
		}
		if attemptTimedOut(parent, ctx, err, deadline) {
			err = fmt.Errorf("%w: %w", errAttemptTimeout, err)
		}
		for _, b := range batches {
			p.retryOrFail(b, err, true)
		}
		return false
	}
	res := r.(*produceAPI.Response)
	for _, b := range batches {
		rp := findPartition(res, b.Topic, b.Partition)
		if rp == nil {
			p.retryOrFail(b, fmt.Errorf("produce: no response for %s/%d", b.Topic, b.Partition), true)
			continue
		}
		switch kafka.Error(rp.ErrorCode) {
		case kafka.NotLeaderForPartition, kafka.LeaderNotAvailable, kafka.UnknownTopicOrPartition,
			kafka.FencedLeaderEpoch, kafka.UnknownLeaderEpoch:
			stale = true
		}
		p.handle(ctx, b, rp)
	}
	p.finish(batches)
	return stale
}

// finish frees the partition of every batch of batches that is done and
// not yet reported, and reports it. Each batch is finished by one
// goroutine at a time: the one sending it, or Produce between rounds.
func (p *Producer) finish(batches []*Batch) {
	for _, b := range batches {
		if !b.done || b.reported {
			continue
		}
		b.reported = true
		b.part.mu.Unlock()
		if b.onDone != nil {
			b.onDone(b)
		}
	}
}

func findPartition(res *produceAPI.Response, topic string, partition int) *produceAPI.ResponsePartition {
	for i := range res.Topics {
		if res.Topics[i].Topic != topic {
			continue
		}
		for j := range res.Topics[i].Partitions {
			if int(res.Topics[i].Partitions[j].Partition) == partition {
				return &res.Topics[i].Partitions[j]
			}
		}
	}
	return nil
}

// handle applies the broker's answer for b.
func (p *Producer) handle(ctx context.Context, b *Batch, rp *produceAPI.ResponsePartition) {
	code := kafka.Error(rp.ErrorCode)
	switch code {
	case 0:
		p.succeed(b, rp.BaseOffset, false)
	case kafka.DuplicateSequenceNumber:
		p.succeed(b, -1, true)
	case kafka.OutOfOrderSequenceNumber, kafka.UnknownProducerId:
		// The broker rejected the batch: it lost this producer's state
		// for the partition (expired, or truncated with the log). The
		// batch is the only one in flight, so it can start a new epoch
		// at sequence 0.
		err := brokerError(code, rp.ErrorMessage)
		if b.unknown {
			// An earlier attempt may have stored the batch: sending it
			// again under a new epoch could store it twice. It fails as
			// ambiguous, and the partition moves to a new epoch.
			p.fail(b, fmt.Errorf("produce: %s/%d rejected after an attempt whose outcome is unknown: %w", b.Topic, b.Partition, err))
			return
		}
		if b.bumpsLeft == 0 {
			p.fail(b, fmt.Errorf("produce: %s/%d still rejected after new epochs: %w", b.Topic, b.Partition, err))
			return
		}
		b.bumpsLeft--
		b.part.reset = true
		if serr := p.sequence(ctx, b); serr != nil {
			p.fail(b, fmt.Errorf("%w (new epoch: %w)", err, serr))
			return
		}
		if serr := SetHeader(b.buf, b.head); serr != nil {
			p.fail(b, serr)
			return
		}
		b.retryErr = err
	case kafka.InvalidProducerEpoch, kafka.ProducerFenced, kafka.InvalidProducerIDMapping:
		// Another producer holds a newer epoch of this ID: resending
		// cannot succeed. A bumped epoch could be that producer's own,
		// so the partition's next batch takes a new producer ID.
		p.idMu.Lock()
		if p.id.id == b.head.ProducerID && p.id.epoch == b.head.ProducerEpoch {
			p.fenced = true
		}
		p.idMu.Unlock()
		b.part.reset = true
		p.fail(b, brokerError(code, rp.ErrorMessage))
	default:
		err := brokerError(code, rp.ErrorMessage)
		if len(rp.RecordErrors) > 0 {
			err = fmt.Errorf("%w (record %d: %s)", err, rp.RecordErrors[0].BatchIndex, rp.RecordErrors[0].BatchIndexErrorMessage)
		}
		// A timeout may have stored the batch; a moved leader did not,
		// but treating every retried error as unknown costs at most an
		// epoch bump. The errors below refuse the batch as a whole,
		// before it is appended: it was not stored.
		switch code {
		case kafka.MessageSizeTooLarge, kafka.RecordListTooLarge, kafka.InvalidRecord, kafka.InvalidMessage,
			kafka.TopicAuthorizationFailed, kafka.InvalidRequiredAcks, kafka.UnsupportedForMessageFormat:
			p.retryOrFail(b, err, false)
		default:
			p.retryOrFail(b, err, true)
		}
	}
}

func brokerError(code kafka.Error, msg string) error {
	if msg != "" && msg != code.Description() {
		return fmt.Errorf("%w: %s", code, msg)
	}
	return code
}

// retryOrFail keeps b for another attempt when err is retried, else ends
// it with err. unknown says the attempt may have stored b.
func (p *Producer) retryOrFail(b *Batch, err error, unknown bool) {
	b.unknown = b.unknown || unknown
	if errors.Is(err, errAttemptTimeout) || p.cfg.Policy.Retryable(err) {
		b.retryErr = err
		return
	}
	p.fail(b, err)
}
