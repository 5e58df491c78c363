// Package difftest runs one scenario through segmentio/kafka-go's Writer
// and Reader and through the SDK's, each on a cluster of its own, and
// compares what the two did: what each call returned (nil, the errors.Is
// and errors.As targets a kafka-go program tests, kafka.WriteErrors
// alignment), whether it returned on its own or only when its ctx ended,
// the messages a Reader handed out, what Completion received, Stats deltas
// and what each cluster stored (key, value, headers, time, partition,
// order, count).
//
// A scenario is a function of one Side; Run calls it once per
// implementation and compares the two traces step by step. A difference
// fails the test unless a row of Differences (the table of intended
// differences, which the sdk package doc prints) matches it.
//
//	difftest.Run(t, difftest.Embedded(), scenario)
//
// Clusters: Embedded starts one in-process broker (kfake) per side for
// each scenario; Shared runs both sides on one real broker, with names
// suffixed per side. Every side reaches its broker through a kproxy, so
// that scenarios can hold, close or refuse requests alike on both.
//
// It is test support: it takes a testing.TB and fails the test.
package difftest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
)

// Impl names one implementation of kafka-go's client API.
type Impl string

const (
	// KafkaGo is segmentio/kafka-go itself: the reference.
	KafkaGo Impl = "kafka-go"
	// SDK is the implementation under test.
	SDK Impl = "sdk"
)

// Writer is what kafka.Writer and sdk.Writer share.
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
	Stats() kafka.WriterStats
}

// Reader is what kafka.Reader and sdk.Reader share.
type Reader interface {
	ReadMessage(ctx context.Context) (kafka.Message, error)
	FetchMessage(ctx context.Context) (kafka.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafka.Message) error
	SetOffset(offset int64) error
	SetOffsetAt(ctx context.Context, t time.Time) error
	Offset() int64
	Lag() int64
	ReadLag(ctx context.Context) (int64, error)
	Close() error
	Stats() kafka.ReaderStats
	Config() kafka.ReaderConfig
}

// Factory builds one implementation's clients.
type Factory struct {
	Impl Impl
	// NewWriter returns a Writer configured like w (a copy the factory
	// may keep).
	NewWriter func(w *kafka.Writer) (Writer, error)
	// NewReader returns a Reader for cfg; a panic is turned into an
	// error by the harness.
	NewReader func(cfg kafka.ReaderConfig) (Reader, error)
}

// KafkaGoFactory builds kafka-go's own clients.
func KafkaGoFactory() Factory {
	return Factory{
		Impl: KafkaGo,
		NewWriter: func(w *kafka.Writer) (Writer, error) {
			if w.Transport == nil {
				// Not kafka.DefaultTransport: its metadata cache, shared
				// by every Writer of the process, would not know the
				// topics a scenario creates for up to 6 s.
				w.Transport = &kafka.Transport{}
			}
			return w, nil
		},
		NewReader: func(cfg kafka.ReaderConfig) (Reader, error) {
			if cfg.GroupID != "" || cfg.Logger != nil {
				return kafka.NewReader(cfg), nil
			}
			l := &startLog{changed: make(chan struct{})}
			cfg.Logger = l
			return &kafkaGoReader{Reader: kafka.NewReader(cfg), log: l}, nil
		},
	}
}

// kafkaGoReader is kafka-go's partition Reader made safe to drive from
// the harness under -race. kafka-go starts a goroutine per partition at
// the first fetch and at each SetOffset that moves the offset; the
// goroutine reads the Reader's version without its lock, which the next
// start writes (a data race in kafka-go itself, which -race reports when
// two starts come without a message in between). The goroutine logs
// "initializing kafka reader" once it has read it: after a call that
// started one, the wrapper waits for that line (at most startWait), so
// that the next start comes after the read.
type kafkaGoReader struct {
	*kafka.Reader
	log     *startLog
	started atomic.Bool // a fetch started the partition's goroutine
	closed  atomic.Bool
}

// startWait bounds the wait for a started goroutine's first line.
const startWait = 5 * time.Second

func (r *kafkaGoReader) FetchMessage(ctx context.Context) (kafka.Message, error) {
	mark := r.log.mark()
	m, err := r.Reader.FetchMessage(ctx)
	r.firstFetch(mark)
	return m, err
}

func (r *kafkaGoReader) ReadMessage(ctx context.Context) (kafka.Message, error) {
	mark := r.log.mark()
	m, err := r.Reader.ReadMessage(ctx)
	r.firstFetch(mark)
	return m, err
}

// firstFetch waits, after the Reader's first fetch (which started its
// goroutine unless it was closed), for the goroutine's first line after
// mark.
func (r *kafkaGoReader) firstFetch(mark int) {
	if r.closed.Load() || r.started.Swap(true) {
		return
	}
	r.log.await(mark)
}

func (r *kafkaGoReader) SetOffset(offset int64) error {
	mark := r.log.mark()
	err := r.Reader.SetOffset(offset)
	r.restarted(mark)
	return err
}

func (r *kafkaGoReader) SetOffsetAt(ctx context.Context, t time.Time) error {
	mark := r.log.mark()
	err := r.Reader.SetOffsetAt(ctx, t)
	r.restarted(mark)
	return err
}

// restarted waits, when a SetOffset since mark moved the offset of a
// started Reader (kafka-go logs "setting the offset" then), for the new
// goroutine's first line after it.
func (r *kafkaGoReader) restarted(mark int) {
	if !r.started.Load() || r.closed.Load() {
		return
	}
	if set := r.log.setAfter(mark); set > 0 {
		r.log.await(set)
	}
}

func (r *kafkaGoReader) Close() error {
	r.closed.Store(true)
	return r.Reader.Close()
}

// startLog is a kafka-go Logger that keeps the sequence numbers of the
// last "setting the offset" and "initializing kafka reader" lines.
type startLog struct {
	mu       sync.Mutex
	seq      int
	lastSet  int
	lastInit int
	changed  chan struct{} // closed and replaced at each line
}

func (l *startLog) Printf(format string, _ ...any) {
	l.mu.Lock()
	l.seq++
	switch {
	case strings.HasPrefix(format, "setting the offset"):
		l.lastSet = l.seq
	case strings.HasPrefix(format, "initializing kafka reader"):
		l.lastInit = l.seq
	}
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// mark is the sequence number of the last line.
func (l *startLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// setAfter is the sequence number of the last "setting the offset" line
// if it came after mark, else 0.
func (l *startLog) setAfter(mark int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastSet > mark {
		return l.lastSet
	}
	return 0
}

// await waits for an "initializing kafka reader" line after mark, at
// most startWait.
func (l *startLog) await(mark int) {
	t := time.NewTimer(startWait)
	defer t.Stop()
	for {
		l.mu.Lock()
		done, changed := l.lastInit > mark, l.changed
		l.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-t.C:
			return
		}
	}
}

// Scenario is one case: a name, the topics it needs and what it does.
type Scenario struct {
	// Name is unique among the scenarios and names the test.
	Name string
	// Topics are created on each side's cluster before Run, each with
	// its partition count.
	Topics map[string]int
	// Patience bounds each call that has no deadline of its own; 0 is
	// DefaultPatience. A call still running then "waits for its ctx".
	Patience time.Duration
	// Embedded: the scenario runs only on Embedded clusters (its faults
	// need kfake's controls); Real: only on a real broker.
	EmbeddedOnly, RealOnly bool
	// AutoCreateTopics: the in-process broker creates a topic a request
	// asks for, as Kafka does by default (auto.create.topics.enable).
	AutoCreateTopics bool
	// Run is called once per side, with that side's clients.
	Run func(s *Side)
}

// DefaultPatience is how long a call may take before the harness ends its
// ctx and classes it as waiting for the ctx. No call that returns on its
// own, by an event or at once, comes near it.
const DefaultPatience = 20 * time.Second

// Obs is one observation of a side: a step's name and a canonical
// rendering of what happened, with the side's names replaced by the
// scenario's.
type Obs struct {
	Step  string
	Value string
}

// Trace is what one side did in a scenario.
type Trace struct {
	Impl Impl
	Obs  []Obs
}

// Result is the comparison of the two traces of one scenario.
type Result struct {
	Scenario string
	// Steps is the number of observations compared.
	Steps int
	// Intended are the differences a row of Differences explains, by
	// row ID.
	Intended map[string]int
	// Unexplained are the differences no row explains.
	Unexplained []Diff
}

// Diff is one step whose observations differ.
type Diff struct {
	Step              string
	KafkaGo, SDK      string
	ExplainedByRowIDs []string
}

func (d Diff) String() string {
	return fmt.Sprintf("%s:\n\tkafka-go: %s\n\tsdk:      %s", d.Step, d.KafkaGo, d.SDK)
}

// Compare compares two traces of scenario, KafkaGo's first; embedded says
// they ran on the in-process broker.
func Compare(scenario string, ref, sdk Trace, embedded bool) Result {
	res := Result{Scenario: scenario, Intended: map[string]int{}}
	n := max(len(ref.Obs), len(sdk.Obs))
	for i := 0; i < n; i++ {
		var a, b Obs
		if i < len(ref.Obs) {
			a = ref.Obs[i]
		}
		if i < len(sdk.Obs) {
			b = sdk.Obs[i]
		}
		res.Steps++
		step := a.Step
		if step == "" {
			step = b.Step
		}
		if a.Step != b.Step {
			res.Unexplained = append(res.Unexplained, Diff{Step: fmt.Sprintf("step %d (%q vs %q)", i, a.Step, b.Step), KafkaGo: a.Value, SDK: b.Value})
			// The traces went apart: the rest cannot be paired.
			break
		}
		if a.Value == b.Value {
			continue
		}
		d := Diff{Step: step, KafkaGo: a.Value, SDK: b.Value}
		if row := explain(scenario, d, embedded); row != "" {
			res.Intended[row]++
			continue
		}
		res.Unexplained = append(res.Unexplained, d)
	}
	return res
}

// Cluster is one side's broker.
type Cluster interface {
	// Addrs are the broker's addresses (the harness puts a proxy in
	// front of the first).
	Addrs() []string
	// Name is the name of the scenario's topic or group logical on this
	// cluster.
	Name(logical string) string
	// CreateTopic creates topic (a name on this cluster) with
	// partitions partitions and waits until each has a leader.
	CreateTopic(ctx context.Context, topic string, partitions int) error
	// DeleteTopic deletes topic.
	DeleteTopic(ctx context.Context, topic string) error
	// AddPartitions grows topic to total partitions and waits until
	// each has a leader.
	AddPartitions(ctx context.Context, topic string, total int) error
	// Close releases the cluster.
	Close()
	// Embedded reports whether the cluster is the in-process broker.
	Embedded() bool
}

// Side is one implementation's run of a scenario: its clients, its
// cluster and the observations it records. Its methods are for the
// scenario's goroutine, except Go's functions, which may record too.
type Side struct {
	Impl     Impl
	t        testing.TB
	f        Factory
	c        Cluster
	proxy    *kproxy.Proxy
	patience time.Duration
	names    map[string]string // cluster name -> logical

	mu      sync.Mutex
	obs     []Obs
	steps   map[string]int
	closers []func()
	wg      sync.WaitGroup
	start   time.Time
	// completions gathers each Completion's messages by step, sorted
	// when the trace ends (their order across partitions is the
	// engine's).
	completions map[string][]string
}

// Proxy is the proxy in front of the side's broker: scenarios hold,
// close or refuse requests through it.
func (s *Side) Proxy() *kproxy.Proxy { return s.proxy }

// Addrs are the bootstrap addresses clients get: the proxy's.
func (s *Side) Addrs() []string { return []string{s.proxy.Addr()} }

// BrokerAddrs are the broker's own addresses, past the proxy.
func (s *Side) BrokerAddrs() []string { return s.c.Addrs() }

// Name is the side's name for a logical topic or group name.
func (s *Side) Name(logical string) string {
	n := s.c.Name(logical)
	s.mu.Lock()
	s.names[n] = logical
	s.mu.Unlock()
	return n
}

// Cluster is the side's cluster.
func (s *Side) Cluster() Cluster { return s.c }

// T is the test.
func (s *Side) T() testing.TB { return s.t }

// record appends an observation, with the side's names made logical.
func (s *Side) record(step, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obs = append(s.obs, Obs{Step: step, Value: s.normalize(value)})
}

// normalize replaces the side's names with the logical ones, longest
// first, so that a name that contains another is replaced whole.
func (s *Side) normalize(v string) string {
	if len(s.names) == 0 {
		return v
	}
	keys := make([]string, 0, len(s.names))
	for k := range s.names {
		if k != s.names[k] {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		v = strings.ReplaceAll(v, k, s.names[k])
	}
	return v
}

// Note records v under step: any value both sides compute (an offset, a
// lag, a flag).
func (s *Side) Note(step string, v any) { s.record(step, fmt.Sprint(v)) }

// NewWriter builds a Writer like w, a literal of the side's own (kafka-go
// uses it in place), with Addr set to the side's bootstrap addresses unless
// w has one, and records whether that failed; nil when it did. Its Close
// runs when the scenario ends, if the scenario did not.
func (s *Side) NewWriter(step string, w *kafka.Writer) Writer {
	if w.Addr == nil {
		w.Addr = kafka.TCP(s.Addrs()...)
	}
	got, once := build(s, step, func() (Writer, error) { return s.f.NewWriter(w) })
	if once == nil {
		return nil
	}
	return &trackedWriter{Writer: got, once: once}
}

// NewReader builds a Reader for cfg (Brokers set to the side's bootstrap
// addresses unless cfg has some) and records whether that failed or
// panicked; nil when it did. Its Close runs when the scenario ends, if the
// scenario did not.
func (s *Side) NewReader(step string, cfg kafka.ReaderConfig) Reader {
	if cfg.Brokers == nil {
		cfg.Brokers = s.Addrs()
	}
	got, once := build(s, step, func() (Reader, error) { return s.f.NewReader(cfg) })
	if once == nil {
		return nil
	}
	return &trackedReader{Reader: got, once: once}
}

// build makes a client with mk, records whether that failed or panicked,
// and has the client closed when the scenario ends; the closeOnce is nil
// when it failed.
func build[C interface{ Close() error }](s *Side, step string, mk func() (C, error)) (C, *closeOnce) {
	var got C
	err := catch(func() (err error) {
		got, err = mk()
		return err
	})
	s.record(step, "new "+Shape(err))
	if err != nil {
		return got, nil
	}
	once := &closeOnce{close: got.Close}
	s.addCloser(func() { once.do() })
	return got, once
}

type closeOnce struct {
	once  sync.Once
	close func() error
	err   error
}

func (c *closeOnce) do() error {
	c.once.Do(func() { c.err = c.close() })
	return c.err
}

// trackedWriter closes once, whether the scenario or the harness closes.
type trackedWriter struct {
	Writer
	once *closeOnce
}

func (w *trackedWriter) Close() error { return w.once.do() }

type trackedReader struct {
	Reader
	once *closeOnce
}

func (r *trackedReader) Close() error { return r.once.do() }

func (s *Side) addCloser(f func()) {
	s.mu.Lock()
	s.closers = append(s.closers, f)
	s.mu.Unlock()
}

// catch runs f and turns a panic into an error.
func catch(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError{p}
		}
	}()
	return f()
}

type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("panic: %v", p.v) }

// Call runs fn with a ctx that ends after the scenario's patience and
// records its outcome: the error's shape and whether fn returned on its
// own ("returns") or only once its ctx ended ("waits for ctx").
func (s *Side) Call(step string, fn func(ctx context.Context) error) error {
	return s.CallWithin(step, s.patience, fn)
}

// CallWithin is Call with a ctx that ends after d: for calls that are to
// wait (for data that does not come, for a broker that does not answer).
func (s *Side) CallWithin(step string, d time.Duration, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := catch(func() error { return fn(ctx) })
	s.record(step, Shape(err)+" "+class(ctx))
	return err
}

// Write calls w.WriteMessages(msgs) as Call does.
func (s *Side) Write(step string, w Writer, msgs ...kafka.Message) error {
	return s.Call(step, func(ctx context.Context) error { return w.WriteMessages(ctx, msgs...) })
}

// WriteCanceled calls w.WriteMessages(msgs) as CallCanceled does.
func (s *Side) WriteCanceled(step string, w Writer, msgs ...kafka.Message) error {
	return s.CallCanceled(step, func(ctx context.Context) error { return w.WriteMessages(ctx, msgs...) })
}

// CallCanceled runs fn with a ctx canceled before the call.
func (s *Side) CallCanceled(step string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := catch(func() error { return fn(ctx) })
	s.record(step, Shape(err))
	return err
}

// CallNoCtx runs fn, which takes no ctx (Close, SetOffset), and records
// its outcome; fn still running after the patience is recorded as
// "blocks" and left running.
func (s *Side) CallNoCtx(step string, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- catch(fn) }()
	t := time.NewTimer(s.patience)
	defer t.Stop()
	select {
	case err := <-done:
		s.record(step, Shape(err))
		return err
	case <-t.C:
		s.record(step, "blocks")
		return errors.New("difftest: still blocked")
	}
}

func class(ctx context.Context) string {
	if ctx.Err() != nil {
		return "(waits for ctx)"
	}
	return "(returns)"
}

// Go runs fn on a goroutine of its own; the trace ends after it.
func (s *Side) Go(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// Wait waits for every function started with Go.
func (s *Side) Wait() { s.wg.Wait() }

// Message records a message a Reader returned, or its error.
func (s *Side) Message(step string, m kafka.Message, err error) {
	if err != nil {
		s.record(step, Shape(err))
		return
	}
	s.record(step, s.renderMessage(m))
}

// FetchMessage calls r.FetchMessage within the patience and records the
// message or the error and its class.
func (s *Side) FetchMessage(step string, r Reader) (kafka.Message, error) {
	return s.fetch(step, s.patience, r.FetchMessage)
}

// FetchMessageWithin is FetchMessage with a ctx that ends after d.
func (s *Side) FetchMessageWithin(step string, d time.Duration, r Reader) (kafka.Message, error) {
	return s.fetch(step, d, r.FetchMessage)
}

// ReadMessage calls r.ReadMessage within the patience and records it.
func (s *Side) ReadMessage(step string, r Reader) (kafka.Message, error) {
	return s.fetch(step, s.patience, r.ReadMessage)
}

func (s *Side) fetch(step string, d time.Duration, f func(context.Context) (kafka.Message, error)) (kafka.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var m kafka.Message
	err := catch(func() (err error) {
		m, err = f(ctx)
		return err
	})
	// Two observations, whatever happened, so that the traces stay in
	// step: the error and the message.
	s.record(step, Shape(err)+" "+class(ctx))
	if m.Value != nil || m.Key != nil || m.Offset != 0 {
		s.record(step+" message", s.renderMessage(m))
	} else {
		s.record(step+" message", "none")
	}
	return m, err
}

// renderMessage renders what a kafka-go program reads of a message.
func (s *Side) renderMessage(m kafka.Message) string {
	return fmt.Sprintf("topic=%s partition=%d offset=%d hwm=%d key=%s value=%s headers=%s time=%s",
		m.Topic, m.Partition, m.Offset, m.HighWaterMark, bytesText(m.Key), bytesText(m.Value), headersText(m.Headers), s.timeText(m.Time))
}

// timeText renders t exactly, unless it falls in the scenario's run so
// far ("now": a write time, which differs between the sides).
func (s *Side) timeText(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	if !t.Before(s.start.Truncate(time.Millisecond)) && !t.After(time.Now()) {
		return "now"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func bytesText(b []byte) string {
	switch {
	case b == nil:
		return "null"
	case len(b) == 0:
		return `""`
	case len(b) > 64:
		return fmt.Sprintf("%d bytes %q...", len(b), b[:16])
	}
	return fmt.Sprintf("%q", b)
}

func headersText(hs []kafka.Header) string {
	if len(hs) == 0 {
		return "[]"
	}
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%q", h.Key) + ":" + bytesText(h.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Completion returns a kafka.Writer Completion that records, under step,
// every message it is given with the error; the records are compared as
// a sorted multiset, since the order across partitions is the engine's.
func (s *Side) Completion(step string) func([]kafka.Message, error) {
	return func(msgs []kafka.Message, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range msgs {
			s.completions[step] = append(s.completions[step], fmt.Sprintf("topic=%s partition=%d key=%s value=%s offset=%d time=%s err=%s",
				m.Topic, m.Partition, bytesText(m.Key), bytesText(m.Value), m.Offset, s.timeText(m.Time), Shape(err)))
		}
	}
}

// WriterStats records the Stats deltas of w that both implementations
// count alike: messages written and whether any error was counted.
func (s *Side) WriterStats(step string, w Writer) {
	st := w.Stats()
	s.record(step, fmt.Sprintf("messages=%d errors>0=%v", st.Messages, st.Errors > 0))
}

// Stored records what the side's cluster holds in topic (a logical
// name): every partition's records in offset order.
func (s *Side) Stored(step, logical string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := readAll(ctx, s.c.Addrs(), s.Name(logical))
	if err != nil {
		s.t.Fatalf("%s: reading %s: %v", s.Impl, logical, err)
	}
	var b strings.Builder
	for p, rs := range recs {
		fmt.Fprintf(&b, "p%d[", p)
		for i, r := range rs {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "{key=%s value=%s headers=%s time=%s}", bytesText(r.Key), bytesText(r.Value), headersText(r.Headers), s.timeText(r.Time))
		}
		b.WriteString("] ")
	}
	s.record(step, strings.TrimSpace(b.String()))
}

// Committed records group's committed offsets of the partitions of topic
// (logical names), -1 where none, and returns them.
func (s *Side) Committed(step, group, topic string, partitions int) []int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := committed(ctx, s.c.Addrs(), s.Name(group), s.Name(topic), partitions)
	if err != nil {
		s.t.Fatalf("%s: committed offsets of %s: %v", s.Impl, group, err)
	}
	if step != "" {
		s.record(step, fmt.Sprint(offs))
	}
	return offs
}

// Run runs sc on both implementations, each on a cluster from newCluster,
// and fails t on every difference no row of Differences explains. It
// returns the comparison.
func Run(t *testing.T, newCluster func(t testing.TB, impl Impl) Cluster, sc Scenario, sdk Factory) Result {
	t.Helper()
	return RunPair(t, newCluster, sc, KafkaGoFactory(), sdk)
}

// RunPair is Run with the reference implementation given too (the
// harness's own tests compare kafka-go with a broken copy of itself).
func RunPair(t *testing.T, newCluster func(t testing.TB, impl Impl) Cluster, sc Scenario, ref, under Factory) Result {
	t.Helper()
	res, traces := runPair(t, newCluster, sc, ref, under)
	for row, n := range res.Intended {
		t.Logf("%s: %d step(s) differ as row %s says", sc.Name, n, row)
	}
	for _, d := range res.Unexplained {
		t.Errorf("%s: a difference from kafka-go no row of the table explains, at %s", sc.Name, d)
	}
	if testing.Verbose() && (len(res.Unexplained) > 0 || os.Getenv("DIFFTEST_TRACE") != "") {
		for i := range traces[0].Obs {
			t.Logf("kafka-go trace %d: %s = %s", i, traces[0].Obs[i].Step, traces[0].Obs[i].Value)
		}
		for i := range traces[1].Obs {
			t.Logf("sdk trace %d: %s = %s", i, traces[1].Obs[i].Step, traces[1].Obs[i].Value)
		}
	}
	return res
}

// runPair runs sc on both and compares, without reporting.
func runPair(t testing.TB, newCluster func(t testing.TB, impl Impl) Cluster, sc Scenario, ref, under Factory) (Result, []Trace) {
	traces := make([]Trace, 2)
	embedded := make([]bool, 2)
	var wg sync.WaitGroup
	for i, f := range []Factory{ref, under} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newCluster(t, f.Impl)
			embedded[i] = c.Embedded()
			traces[i] = runSide(t, c, sc, f)
		}()
	}
	wg.Wait()
	return Compare(sc.Name, traces[0], traces[1], embedded[0]), traces
}

func runSide(t testing.TB, c Cluster, sc Scenario, f Factory) Trace {
	defer c.Close()
	patience := sc.Patience
	if patience == 0 {
		patience = DefaultPatience
	}
	s := &Side{
		Impl: f.Impl, t: t, f: f, c: c, patience: patience,
		names: map[string]string{}, steps: map[string]int{},
		completions: map[string][]string{}, start: time.Now(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topics := make([]string, 0, len(sc.Topics))
	for name := range sc.Topics {
		topics = append(topics, name)
	}
	slices.Sort(topics)
	for _, name := range topics {
		if err := c.CreateTopic(ctx, s.Name(name), sc.Topics[name]); err != nil {
			t.Fatalf("%s: creating topic %s: %v", f.Impl, name, err)
		}
	}
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatalf("%s: starting the proxy: %v", f.Impl, err)
	}
	s.proxy = p
	func() {
		defer func() {
			// Close what the scenario left open, newest first, then
			// stop the proxy.
			s.Wait()
			for i := len(s.closers) - 1; i >= 0; i-- {
				s.closers[i]()
			}
			p.Close()
		}()
		sc.Run(s)
	}()
	steps := make([]string, 0, len(s.completions))
	for step := range s.completions {
		steps = append(steps, step)
	}
	slices.Sort(steps)
	for _, step := range steps {
		got := slices.Clone(s.completions[step])
		slices.Sort(got)
		s.record(step, strings.Join(got, "\n"))
	}
	return Trace{Impl: f.Impl, Obs: s.obs}
}
