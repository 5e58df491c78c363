package difftest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// DefaultSeed is the seed of the property scenarios when the test gives
// none: CI runs the same inputs every time; DIFFTEST_SEED explores others.
const DefaultSeed = 20261203

// Properties returns n scenarios made from seed: random messages (keys,
// values and header values null, empty or set; times zero, past, recent,
// the epoch or a few minutes ahead) written in a few calls through a
// random Writer configuration (balancer, acks, compression, batch size,
// async with Completion), then what each cluster stored, and the first
// partition read back through a partition Reader with a random
// configuration.
func Properties(seed uint64, n int) []Scenario {
	var out []Scenario
	for i := range n {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		p := property(rng)
		out = append(out, Scenario{
			Name:   fmt.Sprintf("property/seed=%d/%d", seed, i),
			Topics: map[string]int{"t": p.partitions, "u": 2},
			Run:    p.run,
		})
	}
	return out
}

type propertyCase struct {
	partitions int
	balancer   int // index in propertyBalancers
	acks       kafka.RequiredAcks
	codec      kafka.Compression
	batchSize  int
	async      bool
	calls      [][]kafka.Message
	queue      int // the Reader's QueueCapacity
	minBytes   int
	batchBytes int64 // 0: kafka-go's default
	// perMessage: the messages name their topic, t or u, and the Writer
	// none.
	perMessage bool
}

// propertyBalancers place every message deterministically (no random
// placement of keyless messages).
var propertyBalancers = []func() kafka.Balancer{
	func() kafka.Balancer { return nil },
	func() kafka.Balancer { return &kafka.RoundRobin{ChunkSize: 3} },
	func() kafka.Balancer { return &kafka.Hash{} },
	func() kafka.Balancer { return kafka.Murmur2Balancer{Consistent: true} },
	func() kafka.Balancer { return kafka.CRC32Balancer{Consistent: true} },
	func() kafka.Balancer { return &kafka.LeastBytes{} },
}

func property(rng *rand.Rand) propertyCase {
	p := propertyCase{
		partitions: 1 + rng.IntN(4),
		balancer:   rng.IntN(len(propertyBalancers)),
		acks:       []kafka.RequiredAcks{kafka.RequireAll, kafka.RequireOne}[rng.IntN(2)],
		codec:      []kafka.Compression{0, kafka.Gzip, kafka.Snappy, kafka.Lz4, kafka.Zstd}[rng.IntN(5)],
		batchSize:  1 + rng.IntN(100),
		async:      rng.IntN(3) == 0,
		queue:      1 + rng.IntN(200),
		minBytes:   1 + rng.IntN(1000),
		perMessage: rng.IntN(3) == 0,
	}
	if rng.IntN(4) == 0 {
		// Some messages may be over it: kafka.MessageTooLargeError.
		p.batchBytes = int64(2000 + rng.IntN(2000))
	}
	for range 1 + rng.IntN(3) {
		var msgs []kafka.Message
		for range 1 + rng.IntN(25) {
			m := randomMessage(rng)
			if p.perMessage {
				m.Topic = []string{"t", "u"}[rng.IntN(2)]
			}
			msgs = append(msgs, m)
		}
		p.calls = append(p.calls, msgs)
	}
	return p
}

func randomBytes(rng *rand.Rand, max int) []byte {
	switch rng.IntN(5) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, 1+rng.IntN(max))
	for i := range b {
		b[i] = "abcdefgh\x00\xff"[rng.IntN(10)]
	}
	return b
}

func randomMessage(rng *rand.Rand) kafka.Message {
	m := kafka.Message{Key: randomBytes(rng, 6), Value: randomBytes(rng, 3000)}
	for range rng.IntN(4) {
		m.Headers = append(m.Headers, kafka.Header{Key: string(randomBytes(rng, 5)), Value: randomBytes(rng, 10)})
	}
	switch rng.IntN(6) {
	case 1:
		m.Time = fixedTime.Add(time.Duration(rng.IntN(1e6)) * time.Millisecond)
	case 2:
		m.Time = runTime.Add(-time.Duration(rng.IntN(48)) * time.Hour)
	case 3:
		m.Time = time.Unix(0, 0)
	case 4:
		m.Time = runTime.Add(time.Duration(rng.IntN(10)) * time.Minute)
	}
	return m
}

func (p propertyCase) run(s *Side) {
	w := &kafka.Writer{Topic: s.Name("t"), Balancer: propertyBalancers[p.balancer](), RequiredAcks: p.acks,
		Compression: p.codec, BatchSize: p.batchSize, BatchBytes: p.batchBytes, BatchTimeout: 5 * time.Millisecond, Async: p.async}
	if p.perMessage {
		w.Topic = ""
	}
	if p.async {
		w.Completion = s.Completion("Completion")
	}
	s.Note("config", fmt.Sprintf("partitions=%d balancer=%d acks=%d codec=%d batch=%d bytes=%d async=%v per-message=%v calls=%d",
		p.partitions, p.balancer, p.acks, p.codec, p.batchSize, p.batchBytes, p.async, p.perMessage, len(p.calls)))
	sw := s.NewWriter("NewWriter", w)
	if sw == nil {
		return
	}
	for i, msgs := range p.calls {
		named := make([]kafka.Message, len(msgs))
		for j, m := range msgs {
			if m.Topic != "" {
				m.Topic = s.Name(m.Topic)
			}
			named[j] = m
		}
		s.Call(fmt.Sprintf("WriteMessages %d", i), func(ctx context.Context) error { return sw.WriteMessages(ctx, named...) })
	}
	s.CallNoCtx("Close", sw.Close)
	s.Stored("stored", "t")
	s.Stored("stored u", "u")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := readAll(ctx, s.c.Addrs(), s.Name("t"))
	if err != nil {
		s.t.Fatalf("%s: %v", s.Impl, err)
	}
	r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), QueueCapacity: p.queue, MinBytes: p.minBytes, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
	if r == nil || len(recs) == 0 {
		return
	}
	for i := range recs[0] {
		s.FetchMessage(fmt.Sprintf("FetchMessage %d", i), r)
	}
	s.Note("Offset", r.Offset())
	s.Note("Lag", r.Lag())
	// Stats().Offset and Lag are left out: kafka-go's are those of its
	// reading goroutine's last fetch, ahead of what was handed out, so
	// their values depend on how its batches fell; Offset() and Lag()
	// above are the handed-out ones.
	st := r.Stats()
	s.Note("Stats", fmt.Sprintf("messages=%d", st.Messages))
}

// PropertyInputs returns the seed and number of property scenarios: from
// DIFFTEST_SEED and DIFFTEST_CASES when set, else DefaultSeed and n. It
// logs the seed, so that a failure can be replayed.
func PropertyInputs(t testing.TB, n int) (uint64, int) {
	t.Helper()
	seed := uint64(DefaultSeed)
	if v := os.Getenv("DIFFTEST_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DIFFTEST_SEED=%q: not a number", v)
		}
		seed = s
	}
	if v := os.Getenv("DIFFTEST_CASES"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 1 {
			t.Fatalf("DIFFTEST_CASES=%q: not a positive number", v)
		}
		n = c
	}
	t.Logf("property scenarios: DIFFTEST_SEED=%d DIFFTEST_CASES=%d", seed, n)
	return seed, n
}
