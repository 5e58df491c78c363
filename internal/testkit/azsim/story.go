package azsim

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Producer is what a Story writes with; *kafka.Writer fits, and so does
// any drop-in replacement with the same method.
type Producer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

// Consumer is what a Story reads with; *kafka.Reader fits.
type Consumer interface {
	ReadMessage(ctx context.Context) (kafka.Message, error)
	Close() error
}

// Story is the end-to-end convergence scenario: a producer and a consumer
// in LocalAZ start while agents exist only in RemoteAZ; an agent then
// appears in LocalAZ; the clients run until they have moved to it (or
// Settle has passed) and then through a settled window; with RemoveLocal
// the local agent is then removed and they run until they are back across
// AZs. Finally the producer stops and the consumer drains.
//
// The phases end on events, not on wall-clock margins, so that a slow or
// loaded machine delays a story instead of failing it: the local agent is
// added once both clients have moved data across AZs, and the settled
// window starts once both have moved data through the local agent and a
// load-balancing pass has since run over every connection they had open.
// Settle bounds each of these waits; a client that never moves (the
// control stories) simply uses it up.
type Story struct {
	// Backend is the broker's host:port; Topic must exist on it.
	Backend string
	Topic   string
	// LocalAZ is where the clients are; RemoteAZ is where the first agent
	// is. Defaults: "az-b" and "az-a".
	LocalAZ, RemoteAZ string
	// Interval is the load-balancing interval. Default: 200ms.
	Interval time.Duration
	// Before is the least time before the local agent is added; it is added
	// once both produce and fetch bytes have also crossed AZs. After is the
	// least time from its start to the end of the settled window, which
	// lasts After - After/2 and starts no earlier than After/2 after the
	// agent; with RemoveLocal, After is also the least time the clients run
	// after the removal. Defaults: 1s and 2s.
	Before, After time.Duration
	// Settle bounds each wait for an event (see Story). Default: 10s.
	Settle time.Duration
	// RemoveLocal removes the local agent after the After phase (story b).
	RemoveLocal bool
	// WriteEvery is the pause between two synchronous single-message
	// writes. Default: 2ms.
	WriteEvery time.Duration
	// Drain bounds the wait for the consumer to see every acknowledged
	// message at the end; the wait ends sooner once the consumer has gone
	// past where each one it has not seen is stored (it skipped them).
	// Default: 20s.
	Drain time.Duration
	// NewProducer and NewConsumer build the clients from a bootstrap list
	// (the agents' addresses when they start).
	NewProducer func(bootstrap []string) (Producer, error)
	NewConsumer func(bootstrap []string) (Consumer, error)
	// Locate tells the simulator the AZ of clients whose ID names none
	// (plain kafka-go clients), for accounting; see the Locate option.
	Locate func(clientID string) string
	// Logger receives simulator logs. Default: discard.
	Logger *slog.Logger
}

// StoryReport is what a Story measured.
type StoryReport struct {
	// Cross-AZ traffic (client AZ != agent AZ) per phase: before the local
	// agent appeared, after it did (from its start to the end of the
	// settled window), in the settled window (the "stays zero" window), and
	// after the local agent was removed (RemoveLocal only).
	CrossBefore, CrossAfter, CrossSettled, CrossAfterRemoval Traffic
	// Moved is true when both clients moved Produce and Fetch bytes through
	// the local agent before the settled window; SettledAt is when that
	// window started, from the local agent's start.
	Moved     bool
	SettledAt time.Duration
	// BeforeTook is how long the clients ran before the local agent was
	// added; AfterTook runs from its start to the end of the settled window.
	BeforeTook, AfterTook time.Duration
	// Local is the traffic between the clients' AZ and its own agent.
	Local Traffic
	// Convergence is the time from the local agent's start to the last
	// cross-AZ Produce or Fetch byte in the After phase; 0 if none crossed
	// after it started. Converged is false if cross-AZ Produce or Fetch
	// bytes still flowed in the settled window.
	Convergence time.Duration
	Converged   bool
	// Produce latencies of successful writes: in steady state (the Before
	// phase and the settled window) and during the switch (from the local
	// agent's start to Convergence plus one Interval).
	SteadyP50, SteadyP99, SwitchP50, SwitchP99 time.Duration
	SwitchWrites                               int
	// Message accounting. Acked writes returned nil; Failed returned an
	// error (the message may still have been stored: FailedButStored).
	// Duplicates counts values stored more than once (seen at two or more
	// offsets: a producer-side duplicate); Redelivered counts deliveries of
	// an offset the consumer had already returned (a consumer-group
	// re-delivery after a rebalance, not a duplicate on the broker).
	Produced, Acked, Failed, Consumed, Lost, Duplicates, Redelivered, FailedButStored int
	// LostStored counts the lost messages found on the broker by reading
	// every partition directly after the story: stored but never consumed
	// (a consumer-side skip). Lost - LostStored were acknowledged to the
	// producer but are not on the broker. LostSample names a few.
	LostStored int
	LostSample []string
	// WriteErrors holds up to 5 distinct producer error texts.
	WriteErrors []string
	// LBCloses is the number of connections closed by load balancing.
	LBCloses int64
	// Stats is the final accounting snapshot.
	Stats Stats
}

func (s *Story) defaults() {
	if s.LocalAZ == "" {
		s.LocalAZ = "az-b"
	}
	if s.RemoteAZ == "" {
		s.RemoteAZ = "az-a"
	}
	if s.Interval <= 0 {
		s.Interval = 200 * time.Millisecond
	}
	if s.Before <= 0 {
		s.Before = time.Second
	}
	if s.After <= 0 {
		s.After = 2 * time.Second
	}
	if s.WriteEvery <= 0 {
		s.WriteEvery = 2 * time.Millisecond
	}
	if s.Drain <= 0 {
		s.Drain = 20 * time.Second
	}
	if s.Settle <= 0 {
		s.Settle = 10 * time.Second
	}
}

type write struct {
	start time.Time
	took  time.Duration
	err   error
}

// Run plays the story. It returns an error only when the setup fails or
// ctx ends; what went wrong with the data is in the report.
func (s Story) Run(ctx context.Context) (StoryReport, error) {
	s.defaults()
	var rep StoryReport
	opts := []Option{Interval(s.Interval), Logger(s.Logger)}
	if s.Locate != nil {
		opts = append(opts, Locate(s.Locate))
	}
	sim, err := Start(s.Backend, opts...)
	if err != nil {
		return rep, err
	}
	defer sim.Close()
	if _, err := sim.AddAgent(s.RemoteAZ); err != nil {
		return rep, err
	}
	bootstrap := sim.Addrs()
	prod, err := s.NewProducer(bootstrap)
	if err != nil {
		return rep, fmt.Errorf("story: producer: %w", err)
	}
	cons, err := s.NewConsumer(bootstrap)
	if err != nil {
		_ = prod.Close()
		return rep, fmt.Errorf("story: consumer: %w", err)
	}

	var (
		mu     sync.Mutex
		writes []write
		acked  = map[string]bool{}
		failed = map[string]bool{}
		seen   = map[string]int{}                // value -> deliveries
		stored = map[string]map[offsetKey]bool{} // value -> offsets it was delivered from
		past   = map[int]int64{}                 // partition -> highest offset delivered
	)
	consCtx, stopCons := context.WithCancel(ctx)
	consDone := make(chan struct{})
	go func() {
		defer close(consDone)
		for {
			m, err := cons.ReadMessage(consCtx)
			if err != nil && m.Topic == "" {
				if consCtx.Err() != nil {
					return
				}
				continue // a plain reader may surface transient errors
			}
			// A message returned with an error (the sdk Reader's failed
			// commit) was handed to the caller: it counts.
			mu.Lock()
			seen[string(m.Value)]++
			at := stored[string(m.Value)]
			if at == nil {
				at = map[offsetKey]bool{}
				stored[string(m.Value)] = at
			}
			at[offsetKey{m.Partition, m.Offset}] = true
			if o, ok := past[m.Partition]; !ok || m.Offset > o {
				past[m.Partition] = m.Offset
			}
			mu.Unlock()
		}
	}()
	prodCtx, stopProd := context.WithCancel(ctx)
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for seq := 0; prodCtx.Err() == nil; seq++ {
			v := strconv.Itoa(seq)
			start := time.Now()
			err := prod.WriteMessages(prodCtx, kafka.Message{Key: []byte(v), Value: []byte(v)})
			if err != nil && prodCtx.Err() != nil {
				return // stopped mid-write: neither acked nor failed
			}
			mu.Lock()
			writes = append(writes, write{start, time.Since(start), err})
			if err == nil {
				acked[v] = true
			} else {
				failed[v] = true
			}
			mu.Unlock()
			select {
			case <-prodCtx.Done():
			case <-time.After(s.WriteEvery):
			}
		}
	}()
	stop := func() {
		stopProd()
		<-prodDone
		stopCons()
		<-consDone
		_ = prod.Close()
		_ = cons.Close()
	}

	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	// waitFor polls the accounting until cond holds or Settle has passed,
	// and reports whether it held.
	waitFor := func(cond func(Stats) bool) (bool, error) {
		deadline := time.Now().Add(s.Settle)
		for {
			if cond(sim.Stats()) {
				return true, nil
			}
			if time.Now().After(deadline) {
				return false, nil
			}
			if err := sleep(10 * time.Millisecond); err != nil {
				return false, err
			}
		}
	}
	crossed := func(since Traffic) func(Stats) bool {
		return func(st Stats) bool {
			d := st.CrossAZ().Sub(since)
			return d.ProduceBytes > 0 && d.FetchBytes > 0
		}
	}
	localPair := Pair{s.LocalAZ, s.LocalAZ}

	t0 := time.Now()
	if err := sleep(s.Before); err != nil {
		return rep, err
	}
	// The story proves nothing unless both clients crossed AZs first.
	if _, err := waitFor(crossed(Traffic{})); err != nil {
		return rep, err
	}
	stBefore := sim.Stats()
	tAdd := time.Now()
	local, err := sim.AddAgent(s.LocalAZ)
	if err != nil {
		stop()
		return rep, err
	}
	if err := sleep(s.After / 2); err != nil {
		return rep, err
	}
	// Both clients reached the local agent; then one whole balancing pass
	// (the next but one to complete) closes what they still had open
	// across AZs.
	var passes int64
	moved, err := waitFor(func(st Stats) bool {
		l := st.Pairs[localPair]
		if l.ProduceBytes == 0 || l.FetchBytes == 0 {
			return false
		}
		if passes == 0 {
			passes = st.LBPasses + 2
		}
		return st.LBPasses >= passes
	})
	if err != nil {
		return rep, err
	}
	rep.Moved = moved
	stMid := sim.Stats()
	tMid := time.Now()
	rep.SettledAt = tMid.Sub(tAdd)
	if err := sleep(s.After - s.After/2); err != nil {
		return rep, err
	}
	stAfter := sim.Stats()
	tEnd := time.Now()
	rep.BeforeTook, rep.AfterTook = tAdd.Sub(t0), tEnd.Sub(tAdd)
	if s.RemoveLocal {
		if err := sim.RemoveAgent(local); err != nil {
			stop()
			return rep, err
		}
		if err := sleep(s.After); err != nil {
			return rep, err
		}
		if _, err := waitFor(crossed(stAfter.CrossAZ())); err != nil {
			return rep, err
		}
	}
	stopProd()
	<-prodDone

	// Drain: wait until every acknowledged message was consumed, or the
	// consumer went past where each missing one is stored (where is read
	// from the broker once, now that every acknowledged write is there).
	deadline := time.Now().Add(s.Drain)
	var where map[string]offsetKey
	for {
		mu.Lock()
		missing, skipped := 0, 0
		for v := range acked {
			if seen[v] > 0 {
				continue
			}
			missing++
			if at, ok := where[v]; where != nil && (!ok || past[at.partition] > at.offset) {
				skipped++ // not stored, or the consumer is past it
			}
		}
		mu.Unlock()
		if missing == skipped && (missing == 0 || where != nil) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if where == nil {
			if w, err := readAll(ctx, s.Backend, s.Topic); err == nil {
				where = w
				continue
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopCons()
	<-consDone
	_ = prod.Close()
	_ = cons.Close()
	stEnd := sim.Stats()

	rep.Stats = stEnd
	rep.CrossBefore = stBefore.CrossAZ()
	rep.CrossAfter = stAfter.CrossAZ().Sub(stBefore.CrossAZ())
	rep.CrossSettled = stAfter.CrossAZ().Sub(stMid.CrossAZ())
	if s.RemoveLocal {
		rep.CrossAfterRemoval = stEnd.CrossAZ().Sub(stAfter.CrossAZ())
	}
	rep.Local = stEnd.Pairs[Pair{s.LocalAZ, s.LocalAZ}]
	rep.LBCloses = stEnd.CrossAZ().LBCloses
	rep.Converged = rep.CrossSettled.ProduceBytes == 0 && rep.CrossSettled.FetchBytes == 0
	if last := stAfter.LastCrossAZ; last.After(tAdd) {
		rep.Convergence = last.Sub(tAdd)
	}

	var steady, switching []time.Duration
	switchEnd := tAdd.Add(rep.Convergence + s.Interval)
	for _, w := range writes {
		if w.err != nil {
			continue
		}
		switch {
		case w.start.After(t0.Add(s.Before/4)) && w.start.Before(tAdd):
			steady = append(steady, w.took) // warm-up excluded
		case !w.start.Before(tAdd) && w.start.Before(switchEnd):
			switching = append(switching, w.took)
		case w.start.After(tMid) && w.start.Before(tEnd) && w.start.After(switchEnd):
			steady = append(steady, w.took)
		}
	}
	rep.SteadyP50, rep.SteadyP99 = percentile(steady, 50), percentile(steady, 99)
	rep.SwitchP50, rep.SwitchP99 = percentile(switching, 50), percentile(switching, 99)
	rep.SwitchWrites = len(switching)

	errTexts := map[string]bool{}
	for _, w := range writes {
		if w.err != nil && len(rep.WriteErrors) < 5 && !errTexts[w.err.Error()] {
			errTexts[w.err.Error()] = true
			rep.WriteErrors = append(rep.WriteErrors, w.err.Error())
		}
	}
	rep.Produced = len(writes)
	rep.Acked = len(acked)
	rep.Failed = len(failed)
	for v, n := range seen {
		rep.Consumed++
		rep.Duplicates += len(stored[v]) - 1
		rep.Redelivered += n - len(stored[v])
		if failed[v] {
			rep.FailedButStored++
		}
	}
	var lost []string
	for v := range acked {
		if seen[v] == 0 {
			lost = append(lost, v)
		}
	}
	rep.Lost = len(lost)
	if len(lost) > 0 {
		slices.Sort(lost)
		rep.LostSample = lost[:min(len(lost), 5)]
		stored, err := readAll(ctx, s.Backend, s.Topic)
		if err != nil {
			return rep, fmt.Errorf("story: reading the topic back after losing %d messages: %w", len(lost), err)
		}
		for _, v := range lost {
			if _, ok := stored[v]; ok {
				rep.LostStored++
			}
		}
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	return rep, nil
}

// offsetKey is where a record is stored.
type offsetKey struct {
	partition int
	offset    int64
}

// percentile returns the p-th percentile (nearest rank) of ds, 0 if empty.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

// String renders the report's headline figures.
func (r StoryReport) String() string {
	return fmt.Sprintf("cross-AZ produce+fetch bytes: before=%d after=%d settled=%d after-removal=%d; local=%d; moved=%v, settled window from %v; converged=%v in %v; "+
		"produce p50/p99 steady=%v/%v switch=%v/%v (%d writes); produced=%d acked=%d failed=%d consumed=%d lost=%d (stored %d, e.g. %q) duplicates=%d redelivered=%d failed-but-stored=%d; lb-closes=%d",
		pf(r.CrossBefore), pf(r.CrossAfter), pf(r.CrossSettled), pf(r.CrossAfterRemoval), pf(r.Local), r.Moved, r.SettledAt.Round(time.Millisecond), r.Converged, r.Convergence.Round(time.Millisecond),
		r.SteadyP50.Round(10*time.Microsecond), r.SteadyP99.Round(10*time.Microsecond), r.SwitchP50.Round(10*time.Microsecond), r.SwitchP99.Round(10*time.Microsecond), r.SwitchWrites,
		r.Produced, r.Acked, r.Failed, r.Consumed, r.Lost, r.LostStored, r.LostSample, r.Duplicates, r.Redelivered, r.FailedButStored, r.LBCloses)
}

func pf(t Traffic) int64 { return t.ProduceBytes + t.FetchBytes }

// readAll reads every message of topic straight from the broker and
// returns where each value is stored (the first place, if more than one).
func readAll(ctx context.Context, broker, topic string) (map[string]offsetKey, error) {
	conn, err := kafka.DialContext(ctx, "tcp", broker)
	if err != nil {
		return nil, err
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if err != nil {
		return nil, err
	}
	out := map[string]offsetKey{}
	for _, p := range parts {
		pc, err := kafka.DialLeader(ctx, "tcp", broker, topic, p.ID)
		if err != nil {
			return nil, err
		}
		first, last, err := pc.ReadOffsets()
		pc.Close()
		if err != nil {
			return nil, err
		}
		if first == last {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: p.ID, MaxWait: 50 * time.Millisecond})
		if err := r.SetOffset(first); err != nil {
			r.Close()
			return nil, err
		}
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				return nil, err
			}
			if _, ok := out[string(m.Value)]; !ok {
				out[string(m.Value)] = offsetKey{m.Partition, m.Offset}
			}
			if m.Offset >= last-1 {
				break
			}
		}
		r.Close()
	}
	return out, nil
}
