package difftest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
)

// Scenarios returns the named scenarios, in a stable order.
func Scenarios() []Scenario {
	var out []Scenario
	out = append(out, writerScenarios()...)
	out = append(out, readerScenarios()...)
	return out
}

// fixedTime is a Message.Time far from any run's clock; runTime is the
// clock when the process started, the base of the times "minutes ago"
// (both sides of a scenario must write the same times).
var (
	fixedTime = time.Date(2021, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	runTime   = time.Now().Truncate(time.Second)
)

// fieldMessages are messages that use every field of kafka.Message a
// Writer reads: keys and values null, empty and set; headers; times zero,
// past, old and at the epoch.
func fieldMessages() []kafka.Message {
	return []kafka.Message{
		{Key: []byte("alice"), Value: []byte("signed up")},
		{Key: nil, Value: []byte("no key")},
		{Key: []byte{}, Value: []byte("empty key")},
		{Key: []byte("bob"), Value: nil},
		{Key: []byte("carol"), Value: []byte{}},
		{Key: []byte("dave"), Value: []byte("headers"), Headers: []kafka.Header{{Key: "h1", Value: []byte("v1")}, {Key: "h2", Value: nil}, {Key: "h1", Value: []byte{}}}},
		{Key: []byte("erin"), Value: []byte("fixed time"), Time: fixedTime},
		{Key: []byte("frank"), Value: []byte("3 minutes ago"), Time: runTime.Add(-3 * time.Minute)},
		{Key: []byte("grace"), Value: []byte("a year ago"), Time: runTime.AddDate(-1, 0, 0)},
		{Key: []byte("gus"), Value: []byte("in 10 minutes"), Time: runTime.Add(10 * time.Minute)},
		{Key: []byte("heidi"), Value: []byte("the epoch"), Time: time.Unix(0, 0)},
		{Key: []byte("ivan"), Value: []byte("before the epoch"), Time: time.Unix(-3600, 0)},
		{Key: []byte("judy"), Value: bytes.Repeat([]byte("x"), 100_000)},
	}
}

// balancers are kafka-go's balancers; random says which place messages
// without a key (nil, or for CRC32 also empty) at random, so that the
// scenarios give those only keyed messages.
var balancers = []struct {
	name   string
	b      func() kafka.Balancer
	random func(kafka.Message) bool
}{
	{"default", func() kafka.Balancer { return nil }, nil},
	{"RoundRobin", func() kafka.Balancer { return &kafka.RoundRobin{} }, nil},
	{"RoundRobin/chunks", func() kafka.Balancer { return &kafka.RoundRobin{ChunkSize: 2} }, nil},
	{"LeastBytes", func() kafka.Balancer { return &kafka.LeastBytes{} }, nil},
	{"Hash", func() kafka.Balancer { return &kafka.Hash{} }, nil},
	{"ReferenceHash", func() kafka.Balancer { return &kafka.ReferenceHash{} }, func(m kafka.Message) bool { return m.Key == nil }},
	{"Murmur2", func() kafka.Balancer { return kafka.Murmur2Balancer{} }, func(m kafka.Message) bool { return m.Key == nil }},
	{"Murmur2/consistent", func() kafka.Balancer { return kafka.Murmur2Balancer{Consistent: true} }, nil},
	{"CRC32", func() kafka.Balancer { return kafka.CRC32Balancer{} }, func(m kafka.Message) bool { return len(m.Key) == 0 }},
	{"CRC32/consistent", func() kafka.Balancer { return kafka.CRC32Balancer{Consistent: true} }, nil},
}

// without returns msgs without those drop reports.
func without(msgs []kafka.Message, drop func(kafka.Message) bool) []kafka.Message {
	if drop == nil {
		return msgs
	}
	var out []kafka.Message
	for _, m := range msgs {
		if !drop(m) {
			out = append(out, m)
		}
	}
	return out
}

func writerScenarios() []Scenario {
	var out []Scenario
	for _, b := range balancers {
		for _, acks := range []kafka.RequiredAcks{kafka.RequireAll, kafka.RequireOne, kafka.RequireNone} {
			out = append(out, Scenario{
				Name:   fmt.Sprintf("writer/fields/%s/acks=%d", b.name, acks),
				Topics: map[string]int{"t": 3},
				Run: func(s *Side) {
					w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), Balancer: b.b(), RequiredAcks: acks})
					if w == nil {
						return
					}
					msgs := without(fieldMessages(), b.random)
					s.Write("WriteMessages", w, msgs...)
					s.WriterStats("Stats", w)
					s.CallNoCtx("Close", w.Close)
					if acks != kafka.RequireNone {
						// Without acks nothing says when (or whether)
						// the broker appended what was sent.
						s.Stored("stored", "t")
					}
				},
			})
		}
	}
	out = append(out,
		canceledScenario("writer/canceled-before", false),
		canceledScenario("writer/canceled-after-a-write", true),
		Scenario{
			Name:   "writer/after-close",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll})
				if w == nil {
					return
				}
				s.Call("WriteMessages empty", func(ctx context.Context) error { return w.WriteMessages(ctx) })
				s.CallNoCtx("Close", w.Close)
				s.CallNoCtx("Close again", w.Close)
				s.Write("WriteMessages after Close", w, kafka.Message{Value: []byte("late")})
				s.Stored("stored", "t")
			},
		},
		Scenario{
			Name:   "writer/topic-both-or-neither",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter both", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll})
				if w != nil {
					s.Write("WriteMessages both", w, kafka.Message{Topic: s.Name("t"), Value: []byte("x")})
				}
				w2 := s.NewWriter("NewWriter neither", &kafka.Writer{RequiredAcks: kafka.RequireAll})
				if w2 != nil {
					s.Write("WriteMessages neither", w2, kafka.Message{Value: []byte("x")})
					s.Write("WriteMessages per message", w2, kafka.Message{Topic: s.Name("t"), Value: []byte("y")})
				}
				s.Stored("stored", "t")
			},
		},
		Scenario{
			Name:   "writer/invalid-acks",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				for _, acks := range []kafka.RequiredAcks{2, -2} {
					// One observation per value: the SDK's Writer is
					// never built, kafka-go's fails at its call.
					writeOnce(s, fmt.Sprintf("acks=%d", acks), &kafka.Writer{Addr: kafka.TCP(s.Addrs()...), Topic: s.Name("t"), RequiredAcks: acks})
				}
				s.Stored("stored", "t")
			},
		},
		Scenario{
			Name:   "writer/invalid-compression",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				for _, c := range []kafka.Compression{5, 7, -1} {
					writeOnce(s, fmt.Sprintf("compression=%d", c), &kafka.Writer{Addr: kafka.TCP(s.Addrs()...), Topic: s.Name("t"), Compression: c,
						BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll, MaxAttempts: 1})
				}
				s.Stored("stored", "t")
			},
		},
		Scenario{
			// What Writer.Stats reports after a call of six keyed
			// messages over three partitions.
			Name:   "writer/stats-fields",
			Topics: map[string]int{"t": 3},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{},
					BatchTimeout: time.Millisecond, BatchSize: 50, MaxAttempts: 3, WriteBackoffMin: 5 * time.Millisecond, WriteBackoffMax: 7 * time.Millisecond,
					ReadTimeout: 4 * time.Second, WriteTimeout: 6 * time.Second})
				if w == nil {
					return
				}
				msgs := make([]kafka.Message, 6)
				for i := range msgs {
					msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte("value")}
				}
				s.Write("WriteMessages", w, msgs...)
				st := w.Stats()
				s.Note("Stats settings", fmt.Sprintf("MaxAttempts=%d WriteBackoffMin=%v WriteBackoffMax=%v MaxBatchSize=%d BatchTimeout=%v ReadTimeout=%v WriteTimeout=%v RequiredAcks=%d Async=%v",
					st.MaxAttempts, st.WriteBackoffMin, st.WriteBackoffMax, st.MaxBatchSize, st.BatchTimeout, st.ReadTimeout, st.WriteTimeout, st.RequiredAcks, st.Async))
				s.Note("Stats messages", fmt.Sprintf("Messages=%d Errors=%d", st.Messages, st.Errors))
				s.Note("Stats counters", fmt.Sprintf("Writes=%d Bytes=%d Dials=%d BatchTime=%d", st.Writes, st.Bytes, st.Dials, st.BatchTime.Count))
				s.CallNoCtx("Close", w.Close)
			},
		},
		Scenario{
			// A Transport of the program's own that wraps kafka-go's.
			Name:   "writer/custom-transport",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				writeOnce(s, "NewWriter", &kafka.Writer{Addr: kafka.TCP(s.Addrs()...), Topic: s.Name("t"), RequiredAcks: kafka.RequireAll,
					BatchTimeout: time.Millisecond, Transport: wrappedTransport{&kafka.Transport{}}})
			},
		},
		Scenario{
			Name:   "writer/unknown-topic",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("missing"), RequiredAcks: kafka.RequireAll})
				if w == nil {
					return
				}
				s.Write("WriteMessages", w, kafka.Message{Value: []byte("x")})
				s.WriterStats("Stats", w)
				s.CallNoCtx("Close", w.Close)
			},
		},
		Scenario{
			Name:   "writer/batch-bytes",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				for _, bb := range []int64{100, 2000} {
					w := s.NewWriter(fmt.Sprintf("NewWriter BatchBytes=%d", bb), &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, BatchBytes: bb})
					if w == nil {
						continue
					}
					for _, n := range []int{40, 60, 1900, 1960, 1976, 1977, 2000} {
						v := bytes.Repeat([]byte("v"), n)
						s.Call(fmt.Sprintf("BatchBytes=%d value=%d", bb, n), func(ctx context.Context) error {
							return w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: v}, kafka.Message{Value: []byte("small")})
						})
					}
					s.CallNoCtx("Close", w.Close)
				}
				s.Stored("stored", "t")
			},
		},
		Scenario{
			Name:   "writer/async-completion",
			Topics: map[string]int{"t": 3},
			Run: func(s *Side) {
				for _, acks := range []kafka.RequiredAcks{kafka.RequireAll, kafka.RequireNone} {
					// Completion gets each message as given, with its
					// partition and (when the broker answered) offset.
					step := fmt.Sprintf(" acks=%d", acks)
					w := s.NewWriter("NewWriter"+step, &kafka.Writer{Topic: s.Name("t"), RequiredAcks: acks, Async: true,
						Balancer: &kafka.Hash{}, BatchTimeout: 10 * time.Millisecond, Completion: s.Completion("Completion" + step)})
					if w == nil {
						return
					}
					s.Write("WriteMessages"+step, w, fieldMessages()...)
					s.CallNoCtx("Close"+step, w.Close)
					if acks == kafka.RequireAll {
						// What RequireNone stores, nothing says when.
						s.Stored("stored", "t")
					}
				}
			},
		},
		Scenario{
			// A topic whose broker stamps each batch with its append
			// time (Kafka only: see reader/partition/log-append-time):
			// what Completion gets as a message's Time, without a Time
			// and with one (row completion-time-as-given).
			Name:     "writer/log-append-time",
			RealOnly: true,
			Run: func(s *Side) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				if err := createTopic(ctx, s.BrokerAddrs(), s.Name("lat"), 1, "message.timestamp.type", "LogAppendTime"); err != nil {
					s.T().Fatalf("%s: %v", s.Impl, err)
				}
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("lat"), RequiredAcks: kafka.RequireAll, Async: true,
					BatchTimeout: 10 * time.Millisecond, Completion: s.Completion("Completion")})
				if w == nil {
					return
				}
				s.Write("WriteMessages", w, kafka.Message{Key: []byte("k"), Value: []byte("no time")},
					kafka.Message{Key: []byte("k"), Value: []byte("a time"), Time: fixedTime})
				s.CallNoCtx("Close", w.Close)
			},
		},
		Scenario{
			Name:   "writer/async-unknown-topic",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("missing"), RequiredAcks: kafka.RequireAll, Async: true,
					BatchTimeout: 10 * time.Millisecond, Completion: s.Completion("Completion")})
				if w == nil {
					return
				}
				s.Write("WriteMessages", w, kafka.Message{Value: []byte("x")})
				s.CallNoCtx("Close", w.Close)
			},
		},
		Scenario{
			// Two of three partitions refuse a call's messages: Stats'
			// Errors counts each partition's failure once, with or
			// without Completion, as kafka-go counts each failed batch.
			Name:   "writer/errors-per-partition",
			Topics: map[string]int{"t": 3},
			Run: func(s *Side) {
				for _, completion := range []bool{false, true} {
					cfg := &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, Balancer: &kafka.RoundRobin{}}
					step := "without Completion"
					if completion {
						cfg.Completion, step = func([]kafka.Message, error) {}, "with Completion"
					}
					w := s.NewWriter("NewWriter "+step, cfg)
					if w == nil {
						return
					}
					s.Write("WriteMessages "+step, w, kafka.Message{Value: []byte("first")})
					w.Stats()
					s.Proxy().OnResponse(kproxy.FailProduce(29, []int32{0, 1}, nil)) // TOPIC_AUTHORIZATION_FAILED
					s.Write("WriteMessages refused "+step, w, numbered(0, 6)...)
					s.Note("Errors "+step, w.Stats().Errors)
					s.Proxy().OnResponse(nil)
					s.CallNoCtx("Close "+step, w.Close)
				}
			},
		},
		Scenario{
			Name:   "writer/stats-after-failure",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, BatchBytes: 1000})
				if w == nil {
					return
				}
				s.Write("WriteMessages", w, kafka.Message{Value: []byte("ok")})
				s.WriterStats("Stats after success", w)
				s.Write("WriteMessages too large", w, kafka.Message{Value: bytes.Repeat([]byte("x"), 2000)})
				s.CallNoCtx("Close", w.Close)
			},
		},
		Scenario{
			Name:   "writer/produce-refused",
			Topics: map[string]int{"t": 2},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{}})
				if w == nil {
					return
				}
				s.Write("WriteMessages", w, kafka.Message{Key: []byte("a"), Value: []byte("before")})
				s.WriterStats("Stats before", w)
				s.Proxy().OnResponse(kproxy.FailProduce(29, []int32{1}, nil)) // TOPIC_AUTHORIZATION_FAILED on partition 1
				s.Write("WriteMessages refused", w, numbered(0, 6)...)
				s.WriterStats("Stats after", w)
				s.CallNoCtx("Close", w.Close)
			},
		},
		Scenario{
			// A produce request corrupted in transit: the broker finds its
			// checksum wrong, stores nothing and answers CORRUPT_MESSAGE,
			// which kafka-go resends (a temporary error). First once, then
			// on every attempt.
			Name:   "writer/corrupt-in-transit",
			Topics: map[string]int{"t": 2},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{},
					MaxAttempts: 3, WriteBackoffMin: 10 * time.Millisecond, WriteBackoffMax: 50 * time.Millisecond})
				if w == nil {
					return
				}
				s.Write("WriteMessages", w, kafka.Message{Key: []byte("a"), Value: []byte("before")})
				var corrupt atomic.Int64
				corrupt.Store(1)
				s.Proxy().OnRequest(func(req kproxy.Request) kproxy.Action {
					if req.Key == 0 && corrupt.Add(-1) >= 0 {
						return kproxy.CorruptRecords
					}
					return kproxy.Forward
				})
				// One message a partition: the engine may send a call's
				// messages of a partition in two pipelined requests, and
				// the in-process broker then stores the second while the
				// first is resent (Kafka refuses it as out of sequence;
				// the Writer doc says so).
				s.Write("WriteMessages corrupted once", w, numbered(0, 2)...)
				s.WriterStats("Stats after", w)
				corrupt.Store(1 << 30)
				s.Write("WriteMessages always corrupted", w, numbered(6, 8)...)
				corrupt.Store(0)
				s.Write("WriteMessages after", w, numbered(8, 10)...)
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "t")
			},
		},
		Scenario{
			// Messages about the broker's max.message.bytes (1048588),
			// uncompressed, then compressed: kafka-go checks a
			// message's size before compression against BatchBytes, the
			// broker the compressed batch.
			Name:   "writer/broker-message-limit",
			Topics: map[string]int{"t": 1, "snappy": 1, "zstd": 1, "random": 1},
			Run: func(s *Side) {
				for _, c := range []struct {
					topic string
					codec kafka.Compression
				}{{"t", 0}, {"snappy", kafka.Snappy}, {"zstd", kafka.Zstd}} {
					prefix := ""
					if c.codec != 0 {
						prefix = c.topic + ": "
					}
					w := s.NewWriter(prefix+"NewWriter", &kafka.Writer{Topic: s.Name(c.topic), RequiredAcks: kafka.RequireAll, Compression: c.codec})
					if w == nil {
						return
					}
					// With the key "k", 1,048,515 bytes of value make
					// the largest batch the broker takes.
					sizes := []int{1_000_100, 1_040_000, 1_048_000, 1_048_511, 1_048_512, 1_048_515, 1_048_516, 1_048_540, 1_048_552, 1_048_553, 1_100_000}
					if c.codec != 0 {
						// The first size the engine refused before it
						// compared its batch compressed, and the first
						// kafka-go refuses (above BatchBytes).
						sizes = append(sizes, 1_048_515, 1_048_554)
					}
					for _, n := range sizes {
						v := bytes.Repeat([]byte("v"), n)
						s.Call(fmt.Sprintf("%sWriteMessages value=%d", prefix, n), func(ctx context.Context) error {
							return w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: v})
						})
					}
					s.CallNoCtx(prefix+"Close", w.Close)
					s.Stored(prefix+"stored", c.topic)
				}
				// A message compression makes larger, within the broker's
				// limit uncompressed and above it compressed.
				w := s.NewWriter("random: NewWriter", &kafka.Writer{Topic: s.Name("random"), RequiredAcks: kafka.RequireAll, Compression: kafka.Gzip})
				if w == nil {
					return
				}
				v := make([]byte, 1_048_500)
				rand.NewChaCha8([32]byte{1}).Read(v)
				s.Call("random: WriteMessages value=1048500", func(ctx context.Context) error {
					return w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: v})
				})
				s.CallNoCtx("random: Close", w.Close)
				s.Stored("random: stored", "random")
			},
		},
		Scenario{
			Name:   "writer/close-while-a-call-waits",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				held := holdProduce(s)
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll,
					WriteTimeout: time.Second, MaxAttempts: 2, WriteBackoffMin: 10 * time.Millisecond, WriteBackoffMax: 10 * time.Millisecond})
				if w == nil {
					return
				}
				var got error
				s.Go(func() { got = w.WriteMessages(context.Background(), kafka.Message{Value: []byte("held")}) })
				<-held
				s.CallNoCtx("Close", w.Close)
				s.Wait()
				s.Note("WriteMessages during Close", Shape(got))
			},
		},
		Scenario{
			Name:   "writer/close-with-async-messages",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				held := holdProduce(s)
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, Async: true,
					BatchTimeout: time.Millisecond, Completion: s.Completion("Completion"),
					WriteTimeout: time.Second, MaxAttempts: 2, WriteBackoffMin: 10 * time.Millisecond, WriteBackoffMax: 10 * time.Millisecond})
				if w == nil {
					return
				}
				s.Write("WriteMessages", w, kafka.Message{Value: []byte("held")})
				<-held
				s.CallNoCtx("Close", w.Close)
			},
		},
		Scenario{
			Name:   "writer/auto-create",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("created"), RequiredAcks: kafka.RequireAll, AllowAutoTopicCreation: true})
				if w == nil {
					return
				}
				// kafka-go's first call may meet the new topic without
				// a leader yet: a caller retries it, as here.
				var err error
				for range 20 {
					if err = w.WriteMessages(context.Background(), kafka.Message{Value: []byte("x")}); err == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				s.Note("WriteMessages (retried)", Shape(err))
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "created")
			},
		},
		Scenario{
			Name:     "writer/broker-goes-away",
			Topics:   map[string]int{"t": 1},
			Patience: 8 * time.Second,
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, MaxAttempts: 3,
					WriteBackoffMin: 10 * time.Millisecond, WriteBackoffMax: 50 * time.Millisecond})
				if w == nil {
					return
				}
				s.Write("WriteMessages", w, kafka.Message{Value: []byte("first")})
				if err := s.Proxy().SetRefusing(true); err != nil {
					s.T().Fatal(err)
				}
				s.Proxy().CloseAll()
				s.Write("WriteMessages while refused", w, kafka.Message{Value: []byte("second")})
				// The broker is back: a call goes through, behind what
				// the Writer still holds of the earlier one.
				if err := s.Proxy().SetRefusing(false); err != nil {
					s.T().Fatal(err)
				}
				s.Write("WriteMessages once back", w, kafka.Message{Value: []byte("third")})
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "t")
			},
		},
		Scenario{
			// Calls refused for their topics between calls a RoundRobin
			// places (row balancer-runs-after-checks).
			Name:   "writer/refused-call-and-balancer",
			Topics: map[string]int{"t": 3},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Balancer: &kafka.RoundRobin{}, RequiredAcks: kafka.RequireAll})
				if w == nil {
					return
				}
				t := s.Name("t")
				msg := func(topic, v string) kafka.Message { return kafka.Message{Topic: topic, Value: []byte(v)} }
				s.Write("WriteMessages a", w, msg(t, "a"))
				s.Write("WriteMessages with no topic", w, msg(t, "lost1"), msg("", "lost2"))
				s.Write("WriteMessages b", w, msg(t, "b"))
				s.Write("WriteMessages with a topic the cluster lacks", w, msg(t, "lost3"), msg(t, "lost4"), msg(s.Name("missing"), "lost5"))
				s.Write("WriteMessages c", w, msg(t, "c"))
				s.Write("WriteMessages d", w, msg(t, "d"))
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "t")
			},
		},
		Scenario{
			// A Balancer that answers a partition the topic lacks (5
			// of 2) for one message of a call, and a negative one for
			// another, with Completion.
			Name:   "writer/balancer-out-of-range",
			Topics: map[string]int{"t": 2},
			Run: func(s *Side) {
				b := kafka.BalancerFunc(func(m kafka.Message, partitions ...int) int {
					switch string(m.Key) {
					case "past":
						return len(partitions) + 3
					case "negative":
						return -1
					}
					return 1
				})
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), Balancer: b, RequiredAcks: kafka.RequireAll,
					MaxAttempts: 2, WriteBackoffMin: 10 * time.Millisecond, WriteBackoffMax: 20 * time.Millisecond, Completion: s.Completion("Completion")})
				if w == nil {
					return
				}
				s.Write("WriteMessages", w, kafka.Message{Key: []byte("a"), Value: []byte("a")}, kafka.Message{Key: []byte("past"), Value: []byte("p")},
					kafka.Message{Key: []byte("b"), Value: []byte("b")})
				s.Write("WriteMessages negative", w, kafka.Message{Key: []byte("negative"), Value: []byte("n")})
				s.Write("WriteMessages after", w, kafka.Message{Key: []byte("c"), Value: []byte("c")})
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "t")
			},
		},
		Scenario{
			// A message the broker refuses whole-batch among others of
			// one call, with BatchSize 1 (row batch-size-not-a-cap).
			// Only Kafka checks timestamps (an hour ahead at most).
			Name:     "writer/batch-size-one",
			Topics:   map[string]int{"t": 1},
			RealOnly: true,
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), BatchSize: 1, RequiredAcks: kafka.RequireAll})
				if w == nil {
					return
				}
				at := time.Now().Add(3 * time.Hour)
				s.Write("WriteMessages", w, kafka.Message{Value: []byte("a")}, kafka.Message{Value: []byte("b")},
					kafka.Message{Value: []byte("ahead"), Time: at}, kafka.Message{Value: []byte("c")}, kafka.Message{Value: []byte("d")})
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "t")
			},
		},
		Scenario{
			// A topic gains partitions under a Writer: once its metadata
			// is refreshed (MetadataTTL), every message of a call is
			// balanced among the new count, so that one key keeps one
			// partition within the call and after it.
			Name:   "writer/partitions-added",
			Topics: map[string]int{"t": 3},
			Run: func(s *Side) {
				const ttl = 300 * time.Millisecond
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{},
					Transport: &kafka.Transport{MetadataTTL: ttl}})
				if w == nil {
					return
				}
				keyed := func(round, times int) []kafka.Message {
					var msgs []kafka.Message
					for k := range 10 {
						for i := range times {
							msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "%d-%d-%d", round, k, i)})
						}
					}
					return msgs
				}
				s.Write("WriteMessages on 3 partitions", w, keyed(0, 1)...)
				growTopic(s, "t", 6, ttl)
				s.Write("WriteMessages on 6 partitions", w, keyed(1, 3)...)
				s.Write("WriteMessages again", w, keyed(2, 1)...)
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "t")
			},
		},
		Scenario{
			// RoundRobin (a Balancer with state) across partitions
			// added: each message is one turn, among the partitions
			// the Writer knows when it is written.
			Name:   "writer/partitions-added-round-robin",
			Topics: map[string]int{"t": 3},
			Run: func(s *Side) {
				const ttl = 300 * time.Millisecond
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, Balancer: &kafka.RoundRobin{},
					Transport: &kafka.Transport{MetadataTTL: ttl}})
				if w == nil {
					return
				}
				s.Write("WriteMessages on 3 partitions", w, numbered(0, 4)...)
				growTopic(s, "t", 6, ttl)
				s.Write("WriteMessages on 6 partitions", w, numbered(4, 12)...)
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "t")
			},
		},
		Scenario{
			// A synchronous call on a Writer with a long BatchTimeout
			// (row sync-calls-skip-batch-timeout); Close writes what
			// kafka-go still holds.
			Name:   "writer/batch-timeout",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, BatchTimeout: time.Minute})
				if w == nil {
					return
				}
				s.CallWithin("WriteMessages", 2*time.Second, func(ctx context.Context) error {
					return w.WriteMessages(ctx, kafka.Message{Value: []byte("one")})
				})
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "t")
			},
		},
		Scenario{
			// A broker that takes produce requests and never answers:
			// kafka-go's call fails once MaxAttempts attempts of
			// WriteTimeout ran out, the SDK's once the delivery budget
			// has (rows rides-through-outages, delivery-budget-timeout),
			// both with a timeout error; nothing is stored.
			Name:     "writer/broker-holds",
			Topics:   map[string]int{"t": 1},
			Patience: 40 * time.Second,
			Run: func(s *Side) {
				w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll, MaxAttempts: 3,
					WriteTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond,
					WriteBackoffMin: 10 * time.Millisecond, WriteBackoffMax: 50 * time.Millisecond})
				if w == nil {
					return
				}
				holdProduce(s)
				s.Write("WriteMessages while held", w, kafka.Message{Value: []byte("held")})
				s.CallNoCtx("Close", w.Close)
				s.Stored("stored", "t")
			},
		},
		Scenario{
			Name: "writer/unreachable",
			Run: func(s *Side) {
				for _, addr := range []struct{ name, addr string }{
					{"dns", "no-such-host.invalid:9092"},
					{"refused", "127.0.0.1:1"},
				} {
					w := s.NewWriter("NewWriter "+addr.name, &kafka.Writer{Addr: kafka.TCP(addr.addr), Topic: "t", RequiredAcks: kafka.RequireAll})
					if w == nil {
						continue
					}
					s.Write("WriteMessages "+addr.name, w, kafka.Message{Value: []byte("x")})
					s.CallNoCtx("Close "+addr.name, w.Close)
				}
			},
		},
	)
	return out
}

// canceledScenario calls WriteMessages with a ctx canceled before the
// call, on a Writer that has written before (it knows the topic) or not.
func canceledScenario(name string, writtenBefore bool) Scenario {
	return Scenario{
		Name:   name,
		Topics: map[string]int{"t": 1},
		Run: func(s *Side) {
			w := s.NewWriter("NewWriter", &kafka.Writer{Topic: s.Name("t"), RequiredAcks: kafka.RequireAll})
			if w == nil {
				return
			}
			if writtenBefore {
				s.Write("WriteMessages before", w, kafka.Message{Value: []byte("first")})
			}
			s.WriteCanceled("WriteMessages canceled", w, kafka.Message{Value: []byte("never")})
			s.Write("WriteMessages after", w, kafka.Message{Value: []byte("once")})
			s.CallNoCtx("Close", w.Close)
			s.Stored("stored", "t")
		},
	}
}

func readerScenarios() []Scenario {
	return []Scenario{
		{
			Name:   "reader/partition/fields",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", fieldMessages()...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond})
				if r == nil {
					return
				}
				s.Note("Offset before", r.Offset())
				s.Note("Lag before", r.Lag())
				for i := range fieldMessages() {
					s.FetchMessage(fmt.Sprintf("FetchMessage %d", i), r)
					s.Note(fmt.Sprintf("Offset %d", i), r.Offset())
					s.Note(fmt.Sprintf("Lag %d", i), r.Lag())
				}
				s.Call("ReadLag", func(ctx context.Context) error {
					n, err := r.ReadLag(ctx)
					s.Note("ReadLag value", n)
					return err
				})
				s.CallWithin("CommitMessages", time.Second, func(ctx context.Context) error { return r.CommitMessages(ctx, kafka.Message{}) })
				s.CallNoCtx("Close", r.Close)
				s.FetchMessage("FetchMessage after Close", r)
			},
		},
		{
			Name:   "reader/partition/set-offset-past-end",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 5)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond})
				if r == nil {
					return
				}
				s.CallNoCtx("SetOffset 7", func() error { return r.SetOffset(7) })
				s.Note("Offset", r.Offset())
				s.Call("ReadLag past the end", func(ctx context.Context) error {
					n, err := r.ReadLag(ctx)
					s.Note("ReadLag past the end value", n)
					return err
				})
				s.FetchMessageWithin("FetchMessage waits", time.Second, r)
				produce(s, "t", numbered(5, 10)...)
				for i := range 3 {
					s.FetchMessage(fmt.Sprintf("FetchMessage %d", i), r)
				}
			},
		},
		{
			// A committed transaction, an aborted one and a plain
			// message: offsets 0-1, marker 2, 3, marker 4, 5.
			Name:   "reader/partition/transaction-markers",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produceTxn(s, "t", true, "c0", "c1")
				produceTxn(s, "t", false, "a3")
				produce(s, "t", kafka.Message{Key: []byte("plain"), Value: []byte("plain")})
				for _, iso := range []kafka.IsolationLevel{kafka.ReadUncommitted, kafka.ReadCommitted} {
					name := isolationName(iso)
					r := s.NewReader("NewReader "+name, kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond, IsolationLevel: iso})
					if r == nil {
						return
					}
					s.Note("read "+name, name+": "+readUntil(s, r, "plain"))
					s.CallNoCtx("Close "+name, r.Close)
				}
			},
		},
		{
			// A log that ends with a transaction's marker: plain 0-1,
			// committed 2-3, marker 4. Once everything is read, the
			// position is the log's end (5) and the lag 0: kafka-go
			// hands the marker out (no-transaction-markers), the SDK
			// passes it over, as Kafka's consumer does.
			Name:   "reader/partition/transaction-ends-the-log",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 2)...)
				produceTxn(s, "t", true, "c2", "c3")
				for _, iso := range []kafka.IsolationLevel{kafka.ReadUncommitted, kafka.ReadCommitted} {
					name := isolationName(iso)
					r := s.NewReader("NewReader "+name, kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond, IsolationLevel: iso})
					if r == nil {
						return
					}
					s.Note("read "+name, name+": "+readUntil(s, r, "c3"))
					passMarker(s, r.FetchMessage, func() bool { return r.Offset() >= 5 })
					ctx, cancel := context.WithTimeout(context.Background(), s.patience)
					lag, err := r.ReadLag(ctx)
					cancel()
					s.Note("past the marker "+name, fmt.Sprintf("Offset %d Lag %d ReadLag %d %s", r.Offset(), r.Lag(), lag, Shape(err)))
					s.CallNoCtx("Close "+name, r.Close)
				}
			},
		},
		{
			// The same log read by a group, committing with each
			// ReadMessage, then marking for the periodic commit: the
			// group's offset is the log's end, where a restarted
			// member starts with nothing to read.
			Name:   "reader/group/transaction-ends-the-log",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 2)...)
				produceTxn(s, "t", true, "c2", "c3")
				for _, interval := range []time.Duration{0, time.Hour} {
					group := "g" + interval.String()
					r := s.NewReader("NewReader "+group, kafka.ReaderConfig{Topic: s.Name("t"), GroupID: s.Name(group), MaxWait: 200 * time.Millisecond,
						CommitInterval: interval})
					if r == nil {
						return
					}
					for i := range 4 {
						s.ReadMessage(fmt.Sprintf("%s ReadMessage %d", group, i), r)
					}
					reads := 0
					passMarker(s, r.ReadMessage, func() bool {
						if interval > 0 {
							reads++
							return reads > 1 // the periodic commit comes with Close
						}
						return s.Committed("", group, "t", 1)[0] >= 5
					})
					s.CallNoCtx("Close "+group, r.Close)
					s.Committed("committed "+group, group, "t", 1)
				}
			},
		},
		{
			// Under ReadCommitted with a transaction open at offsets
			// 3-4: the end of the log is the high watermark (5), where
			// ReadLag counts to and LastOffset starts, as in kafka-go,
			// not the last stable offset (3). The transaction commits
			// once the Reader at LastOffset is fetching.
			Name:   "reader/open/transaction-markers",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 3)...)
				end := openTxn(s, "t", "k3", "k4")
				cfg := kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond, IsolationLevel: kafka.ReadCommitted}
				r := s.NewReader("NewReader", cfg)
				if r == nil {
					return
				}
				readLag := func(step string) {
					ctx, cancel := context.WithTimeout(context.Background(), s.patience)
					defer cancel()
					lag, err := r.ReadLag(ctx)
					s.Note(step, fmt.Sprintf("%d %s", lag, Shape(err)))
				}
				readLag("ReadLag from the start")
				for i := range 3 {
					s.FetchMessage(fmt.Sprintf("FetchMessage %d", i), r)
				}
				readLag("ReadLag after 3")
				last := s.NewReader("NewReader at last", cfg)
				if last == nil {
					return
				}
				s.CallNoCtx("SetOffset LastOffset", func() error { return last.SetOffset(kafka.LastOffset) })
				s.FetchMessageWithin("FetchMessage at last waits", time.Second, last)
				end(true)
				produce(s, "t", kafka.Message{Key: []byte("k100"), Value: []byte("k100")})
				s.Note("read at last", "read_committed: "+readUntil(s, last, "k100"))
				s.CallNoCtx("Close", r.Close)
				s.CallNoCtx("Close at last", last.Close)
			},
		},
		{
			// A topic whose broker stamps each batch with its append
			// time: kfake's stamped batches fail the engine's CRC
			// check, so on Apache Kafka only.
			Name:     "reader/partition/log-append-time",
			RealOnly: true,
			Run: func(s *Side) {
				// As long as the harness gives its own topics.
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				if err := createTopic(ctx, s.BrokerAddrs(), s.Name("lat"), 1, "message.timestamp.type", "LogAppendTime"); err != nil {
					s.T().Fatalf("%s: %v", s.Impl, err)
				}
				produce(s, "lat", kafka.Message{Key: []byte("k"), Value: []byte("written at a fixed time"), Time: fixedTime})
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("lat"), MaxWait: 200 * time.Millisecond})
				if r == nil {
					return
				}
				s.FetchMessage("FetchMessage", r)
			},
		},
		{
			Name:   "reader/partition/set-offset",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 5)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond})
				if r == nil {
					return
				}
				s.FetchMessage("FetchMessage first", r)
				s.CallNoCtx("SetOffset 3", func() error { return r.SetOffset(3) })
				s.FetchMessage("FetchMessage at 3", r)
				s.CallNoCtx("SetOffset FirstOffset", func() error { return r.SetOffset(kafka.FirstOffset) })
				s.Note("Offset after FirstOffset", r.Offset())
				s.FetchMessage("FetchMessage at first", r)
				s.CallNoCtx("SetOffset LastOffset", func() error { return r.SetOffset(kafka.LastOffset) })
				s.FetchMessageWithin("FetchMessage at last waits", time.Second, r)
				s.CallNoCtx("SetOffset -5", func() error { return r.SetOffset(-5) })
				s.Call("SetOffsetAt far past", func(ctx context.Context) error { return r.SetOffsetAt(ctx, time.Unix(0, 0)) })
				s.FetchMessage("FetchMessage after SetOffsetAt", r)
				s.Call("SetOffsetAt in an hour", func(ctx context.Context) error { return r.SetOffsetAt(ctx, time.Now().Add(time.Hour)) })
				s.Note("Offset after SetOffsetAt in an hour", r.Offset())
				s.FetchMessageWithin("FetchMessage after SetOffsetAt in an hour waits", time.Second, r)
			},
		},
		{
			// SetOffset to the offset the Reader reads next keeps what
			// it fetched: records deleted since are still handed out.
			Name:   "reader/partition/set-offset-current",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 6)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond})
				if r == nil {
					return
				}
				s.FetchMessage("FetchMessage first", r)
				s.deleteRecords("t", 0, 4)
				s.CallNoCtx("SetOffset to Offset()", func() error { return r.SetOffset(r.Offset()) })
				s.FetchMessage("FetchMessage after", r)
			},
		},
		{
			// Values kafka-go takes and ignores, or cannot honour
			// either: a StartOffset without a group (it reads from the
			// first offset), a MaxWait below a millisecond.
			Name:   "reader/partition/ignored-config",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 3)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), StartOffset: 2, MaxWait: 500 * time.Microsecond, ReadBatchTimeout: -1})
				if r == nil {
					return
				}
				c := r.Config()
				s.Note("Config", fmt.Sprintf("StartOffset=%d MaxWait=%v ReadBatchTimeout=%v", c.StartOffset, c.MaxWait, c.ReadBatchTimeout))
				s.FetchMessage("FetchMessage", r)
				s.FetchMessage("FetchMessage next", r)
				s.CallNoCtx("Close", r.Close)
			},
		},
		{
			// A Reader of a topic the cluster lacks: kafka-go's first
			// lookup of its partitions lets a cluster with
			// auto.create.topics.enable (Kafka's default; the
			// in-process broker's is off) create it.
			Name:             "reader/missing-topic",
			AutoCreateTopics: true,
			Run: func(s *Side) {
				// The third: GroupTopics without a GroupID, which
				// kafka-go ignores (it reads, and creates, Topic).
				for _, group := range []string{"", "g", "-topics"} {
					topic := "missing" + group
					cfg := kafka.ReaderConfig{Topic: s.Name(topic), MaxWait: 200 * time.Millisecond}
					switch group {
					case "g":
						cfg.GroupID = s.Name(group)
						cfg.HeartbeatInterval, cfg.SessionTimeout, cfg.RebalanceTimeout = 500*time.Millisecond, 6*time.Second, 6*time.Second
					case "-topics":
						cfg.GroupTopics = []string{s.Name("other")}
					}
					r := s.NewReader("NewReader "+topic, cfg)
					if r == nil {
						return
					}
					s.FetchMessageWithin("FetchMessage "+topic, 3*time.Second, r)
					s.CallNoCtx("Close "+topic, r.Close)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					exists, err := topicExists(ctx, s.BrokerAddrs(), s.Name(topic))
					cancel()
					if err != nil {
						s.T().Fatalf("%s: %v", s.Impl, err)
					}
					s.Note(topic+" exists", exists)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				exists, err := topicExists(ctx, s.BrokerAddrs(), s.Name("other"))
				if err != nil {
					s.T().Fatalf("%s: %v", s.Impl, err)
				}
				s.Note("other exists", exists)
			},
		},
		{
			Name:   "reader/partition/max-bytes-below-a-message",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				big := make([]kafka.Message, 3)
				for i := range big {
					big[i] = kafka.Message{Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{byte('a' + i)}, 5000)}
				}
				produce(s, "t", big...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond, MinBytes: 1, MaxBytes: 100})
				if r == nil {
					return
				}
				for i := range big {
					s.FetchMessage(fmt.Sprintf("FetchMessage %d", i), r)
				}
			},
		},
		{
			Name:   "reader/partition/out-of-range-error",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 3)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond, OffsetOutOfRangeError: true})
				if r == nil {
					return
				}
				s.CallNoCtx("SetOffset 2", func() error { return r.SetOffset(2) })
				s.FetchMessage("FetchMessage at 2", r)
				s.CallNoCtx("SetOffset 9", func() error { return r.SetOffset(9) })
				s.FetchMessageWithin("FetchMessage past the end", 5*time.Second, r)
				produce(s, "t", numbered(3, 12)...)
				s.FetchMessageWithin("oore: FetchMessage once the log is past it", 5*time.Second, r)
				s.CallNoCtx("SetOffset -5", func() error { return r.SetOffset(-5) })
				s.Note("Offset after -5", r.Offset())
				s.FetchMessage("FetchMessage after -5", r)
			},
		},
		{
			// Stats after two of six messages were handed out.
			Name:   "reader/partition/stats-counters",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 6)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond})
				if r == nil {
					return
				}
				s.FetchMessage("FetchMessage 0", r)
				s.FetchMessage("FetchMessage 1", r)
				st := r.Stats()
				s.Note("Stats counters", fmt.Sprintf("Messages=%d Bytes=%d Offset=%d Lag=%d", st.Messages, st.Bytes, st.Offset, st.Lag))
				s.CallNoCtx("Close", r.Close)
			},
		},
		{
			Name:   "reader/partition/close-while-fetching",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond})
				if r == nil {
					return
				}
				fetching := make(chan struct{})
				var got error
				s.Go(func() {
					close(fetching)
					_, got = r.FetchMessage(context.Background())
				})
				<-fetching
				s.CallNoCtx("Close", r.Close)
				s.Wait()
				s.Note("FetchMessage during Close", Shape(got))
				s.CallNoCtx("Close again", r.Close)
				s.CallNoCtx("SetOffset after Close", func() error { return r.SetOffset(1) })
				s.Call("SetOffsetAt after Close", func(ctx context.Context) error { return r.SetOffsetAt(ctx, time.Now()) })
				s.Call("ReadLag after Close", func(ctx context.Context) error { _, err := r.ReadLag(ctx); return err })
			},
		},
		{
			Name:   "reader/group/deleted-topic",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 3)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), GroupID: s.Name("g"), MaxWait: 200 * time.Millisecond,
					HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second})
				if r == nil {
					return
				}
				s.ReadMessage("ReadMessage 0", r)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := s.Cluster().DeleteTopic(ctx, s.Name("t")); err != nil {
					s.T().Fatalf("%s: deleting: %v", s.Impl, err)
				}
				s.ReadMessage("ReadMessage 1 after delete", r)
				s.CallNoCtx("Close", r.Close)
			},
		},
		{
			Name:     "reader/partition/broker-goes-away",
			Topics:   map[string]int{"t": 1},
			Patience: 8 * time.Second,
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 1)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond, MaxAttempts: 3,
					ReadBackoffMin: 10 * time.Millisecond, ReadBackoffMax: 50 * time.Millisecond})
				if r == nil {
					return
				}
				s.FetchMessage("FetchMessage", r)
				if err := s.Proxy().SetRefusing(true); err != nil {
					s.T().Fatal(err)
				}
				s.Proxy().CloseAll()
				s.FetchMessage("FetchMessage while refused", r)
			},
		},
		{
			Name: "reader/invalid-config",
			Run: func(s *Side) {
				for _, c := range []struct {
					name string
					cfg  kafka.ReaderConfig
				}{
					{"GroupID and Partition", kafka.ReaderConfig{Topic: "t", GroupID: "g", Partition: 1}},
					{"no Topic", kafka.ReaderConfig{}},
					{"MinBytes above MaxBytes", kafka.ReaderConfig{Topic: "t", MinBytes: 10, MaxBytes: 5}},
					{"negative Partition", kafka.ReaderConfig{Topic: "t", Partition: -1}},
				} {
					r := s.NewReader("NewReader "+c.name, c.cfg)
					if r != nil {
						s.CallNoCtx("Close "+c.name, r.Close)
					}
				}
				// Values kafka-go's Reader starts with and the SDK's
				// engine cannot honour (row engine-limits-at-construction);
				// the harness closes what was made.
				for _, c := range []struct {
					name string
					cfg  kafka.ReaderConfig
				}{
					{"SessionTimeout below 100ms", kafka.ReaderConfig{Topic: "t", GroupID: "g", SessionTimeout: 50 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond}},
					{"HeartbeatInterval above SessionTimeout", kafka.ReaderConfig{Topic: "t", GroupID: "g", SessionTimeout: 2 * time.Second}},
				} {
					s.NewReader("NewReader engine: "+c.name, c.cfg)
				}
			},
		},
		{
			Name:   "reader/config-defaults",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				for _, group := range []string{"", "g"} {
					r := s.NewReader("NewReader "+group, kafka.ReaderConfig{Topic: s.Name("t"), GroupID: group})
					if r == nil {
						continue
					}
					c := r.Config()
					s.Note("Config "+group, fmt.Sprintf("MinBytes=%d MaxBytes=%d MaxWait=%v QueueCapacity=%d ReadBatchTimeout=%v ReadLagInterval=%v HeartbeatInterval=%v CommitInterval=%v PartitionWatchInterval=%v SessionTimeout=%v RebalanceTimeout=%v StartOffset=%d ReadBackoffMin=%v ReadBackoffMax=%v MaxAttempts=%d GroupBalancers=%d IsolationLevel=%d",
						c.MinBytes, c.MaxBytes, c.MaxWait, c.QueueCapacity, c.ReadBatchTimeout, c.ReadLagInterval, c.HeartbeatInterval, c.CommitInterval,
						c.PartitionWatchInterval, c.SessionTimeout, c.RebalanceTimeout, c.StartOffset, c.ReadBackoffMin, c.ReadBackoffMax, c.MaxAttempts, len(c.GroupBalancers), c.IsolationLevel))
					st := r.Stats()
					s.Note("Stats "+group, fmt.Sprintf("MinBytes=%d MaxBytes=%d MaxWait=%v QueueCapacity=%d", st.MinBytes, st.MaxBytes, st.MaxWait, st.QueueCapacity))
					s.CallNoCtx("Close "+group, r.Close)
					// Values the engine rounds (a MaxWait below 10ms):
					// Config and Stats give them as set.
					r = s.NewReader("NewReader set "+group, kafka.ReaderConfig{Topic: s.Name("t"), GroupID: group,
						MinBytes: 5, MaxBytes: 1000, MaxWait: time.Millisecond, QueueCapacity: 7})
					if r == nil {
						continue
					}
					c, st = r.Config(), r.Stats()
					s.Note("Config set "+group, fmt.Sprintf("MinBytes=%d MaxBytes=%d MaxWait=%v QueueCapacity=%d", c.MinBytes, c.MaxBytes, c.MaxWait, c.QueueCapacity))
					s.Note("Stats set "+group, fmt.Sprintf("MinBytes=%d MaxBytes=%d MaxWait=%v QueueCapacity=%d", st.MinBytes, st.MaxBytes, st.MaxWait, st.QueueCapacity))
					s.CallNoCtx("Close set "+group, r.Close)
				}
			},
		},
		{
			Name:   "reader/group/topics-and-interval",
			Topics: map[string]int{"a": 2, "b": 1},
			Run: func(s *Side) {
				produceTo(s, "a", 0, numbered(0, 3)...)
				produceTo(s, "a", 1, numbered(3, 5)...)
				produceTo(s, "b", 0, numbered(5, 9)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{GroupTopics: []string{s.Name("a"), s.Name("b")}, GroupID: s.Name("g"),
					MaxWait: 200 * time.Millisecond, CommitInterval: 50 * time.Millisecond, StartOffset: kafka.FirstOffset,
					HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second})
				if r == nil {
					return
				}
				var got []string
				for range 9 {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					m, err := r.ReadMessage(ctx)
					cancel()
					if err != nil {
						s.T().Errorf("%s: ReadMessage: %v", s.Impl, err)
						return
					}
					got = append(got, s.renderMessage(m))
				}
				slices.Sort(got)
				s.Note("read", strings.Join(got, "\n"))
				s.CallNoCtx("Close", r.Close)
				s.Committed("committed a", "g", "a", 2)
				s.Committed("committed b", "g", "b", 1)
			},
		},
		{
			Name: "reader/unreachable",
			Run: func(s *Side) {
				for _, addr := range []struct{ name, addr string }{
					{"dns", "no-such-host.invalid:9092"},
					{"refused", "127.0.0.1:1"},
				} {
					r := s.NewReader("NewReader "+addr.name, kafka.ReaderConfig{Brokers: []string{addr.addr}, Topic: "t", MaxWait: 200 * time.Millisecond})
					if r == nil {
						continue
					}
					s.FetchMessage("FetchMessage "+addr.name, r)
					s.CallNoCtx("Close "+addr.name, r.Close)
				}
			},
		},
		{
			// Commits naming a partition the topic lacks, no topic, and
			// a topic the cluster lacks, each beside a good one.
			Name:   "reader/group/commit-unknown-partition",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 2)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), GroupID: s.Name("g"), MaxWait: 200 * time.Millisecond})
				if r == nil {
					return
				}
				// Not -1 before anything is known (kafka-go's gauges
				// start at 0); their values depend on how far the join
				// got, so only their signs are compared.
				st := r.Stats()
				s.Note("Stats before a fetch", fmt.Sprintf("offset>=0 %v lag>=0 %v", st.Offset >= 0, st.Lag >= 0))
				m, err := r.FetchMessage(context.Background())
				if err != nil {
					s.T().Errorf("%s: %s: %v", s.Impl, "FetchMessage", err)
					return
				}
				for i, bad := range []kafka.Message{{Topic: m.Topic, Partition: 3, Offset: 5}, {Offset: 5}, {Topic: s.Name("missing"), Offset: 5}} {
					s.Call(fmt.Sprintf("CommitMessages %d", i), func(ctx context.Context) error {
						return r.CommitMessages(ctx, bad, kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset + int64(i)})
					})
				}
				s.CallNoCtx("Close", r.Close)
				s.Note("committed", s.Committed("", "g", "t", 1))
			},
		},
		{
			Name:   "reader/group/commit-another-members-partition",
			Topics: map[string]int{"t": 2},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 2)...)
				cfg := kafka.ReaderConfig{Topic: s.Name("t"), GroupID: s.Name("g"), MaxWait: 200 * time.Millisecond,
					HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second}
				a := s.NewReader("NewReader a", cfg)
				if a == nil {
					return
				}
				_, err := a.FetchMessage(context.Background())
				if err != nil {
					s.T().Errorf("%s: %s: %v", s.Impl, "FetchMessage a", err)
					return
				}
				b := s.NewReader("NewReader b", cfg)
				if b == nil {
					return
				}
				// b's join makes the group rebalance: a keeps one
				// partition, b gets the other. Wait until b reads.
				produceTo(s, "t", 0, numbered(2, 40)...)
				produceTo(s, "t", 1, numbered(2, 40)...)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				mb, err := b.FetchMessage(ctx)
				if err != nil {
					s.T().Errorf("%s: %s: %v", s.Impl, "FetchMessage b", err)
					return
				}
				s.Call("CommitMessages a of b's partition", func(ctx context.Context) error {
					return a.CommitMessages(ctx, kafka.Message{Topic: mb.Topic, Partition: mb.Partition, Offset: 30})
				})
				s.CallNoCtx("Close b", b.Close)
				s.CallNoCtx("Close a", a.Close)
				s.Note("committed of b's partition", s.Committed("", "g", "t", 2)[mb.Partition])
			},
		},
		{
			Name:   "reader/group/commit",
			Topics: map[string]int{"t": 2, "other": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 4)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), GroupID: s.Name("g"), MaxWait: 200 * time.Millisecond,
					HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second})
				if r == nil {
					return
				}
				s.Note("Offset", r.Offset())
				s.Note("Lag", r.Lag())
				s.CallNoCtx("SetOffset", func() error { return r.SetOffset(1) })
				s.Call("ReadLag", func(ctx context.Context) error { _, err := r.ReadLag(ctx); return err })
				var got []kafka.Message
				for i := range 4 {
					m, err := r.FetchMessage(context.Background())
					if err != nil {
						s.T().Errorf("%s: %s: %v", s.Impl, fmt.Sprintf("FetchMessage %d", i), err)
						return
					}
					got = append(got, m)
				}
				s.Note("fetched", len(got))
				s.Note("Offset after fetching", r.Offset())
				s.Note("Lag after fetching", r.Lag())
				s.Call("CommitMessages", func(ctx context.Context) error { return r.CommitMessages(ctx, got...) })
				s.Committed("committed", "g", "t", 2)
				s.Call("CommitMessages not owned", func(ctx context.Context) error {
					return r.CommitMessages(ctx, kafka.Message{Topic: s.Name("other"), Partition: 0, Offset: 0})
				})
				s.CallNoCtx("Close", r.Close)
				s.Call("CommitMessages after Close", func(ctx context.Context) error { return r.CommitMessages(ctx, got...) })
				s.Call("SetOffsetAt after Close", func(ctx context.Context) error { return r.SetOffsetAt(ctx, time.Now()) })
			},
		},
		{
			// The coordinator answers a commit NOT_COORDINATOR five
			// times (it moved), then takes it.
			Name:   "reader/group/commit-coordinator-moves",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 2)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), GroupID: s.Name("g"), MaxWait: 200 * time.Millisecond,
					HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second})
				if r == nil {
					return
				}
				m, err := s.FetchMessage("FetchMessage", r)
				if err != nil {
					return
				}
				s.Proxy().OnResponse(kproxy.FirstOf(kmsg.OffsetCommit, 5, kproxy.FailCommits(16, nil)))
				s.Call("CommitMessages while the coordinator moves", func(ctx context.Context) error { return r.CommitMessages(ctx, m) })
				s.Proxy().OnResponse(nil)
				s.Committed("committed", "g", "t", 1)
				s.CallNoCtx("Close", r.Close)
			},
		},
		{
			// GroupTopics names a topic the cluster does not have.
			Name:     "reader/group/topics-missing-one",
			Topics:   map[string]int{"t": 1},
			Patience: 8 * time.Second,
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 2)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{GroupTopics: []string{s.Name("t"), s.Name("missing")}, GroupID: s.Name("g"),
					MaxWait: 200 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second})
				if r == nil {
					return
				}
				s.FetchMessageWithin("FetchMessage", 6*time.Second, r)
				s.CallNoCtx("Close", r.Close)
			},
		},
		{
			// The coordinator refuses every join, GROUP_AUTHORIZATION_FAILED.
			Name:     "reader/group/join-refused",
			Topics:   map[string]int{"t": 1},
			Patience: 6 * time.Second,
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 1)...)
				s.Proxy().OnResponse(kproxy.FailJoins(30, nil))
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), GroupID: s.Name("g"), MaxWait: 200 * time.Millisecond,
					HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second})
				if r == nil {
					return
				}
				s.FetchMessageWithin("FetchMessage", 4*time.Second, r)
				s.CallNoCtx("Close", r.Close)
			},
		},
		{
			// The commit Close makes of what ReadMessage marked
			// (CommitInterval > 0) is refused, GROUP_AUTHORIZATION_FAILED
			// (row close-commit-refused).
			Name:   "reader/group/close-commit-refused",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 3)...)
				r := s.NewReader("NewReader", kafka.ReaderConfig{Topic: s.Name("t"), GroupID: s.Name("g"), MaxWait: 200 * time.Millisecond,
					CommitInterval: time.Hour, HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second})
				if r == nil {
					return
				}
				for i := range 2 {
					s.ReadMessage(fmt.Sprintf("ReadMessage %d", i), r)
				}
				s.Proxy().OnResponse(kproxy.FailCommits(30, nil))
				defer s.Proxy().OnResponse(nil)
				s.CallNoCtx("Close", r.Close)
				s.Committed("committed", "g", "t", 1)
			},
		},
		{
			// Reads on a ctx that has already ended while messages are
			// queued, with and without a group (row reads-on-ended-ctx).
			// kafka-go picks at random between the ended ctx and its
			// queue; 20 calls leave it no chance of handing none out
			// (2^-20) once messages are queued, so its side differs.
			Name:   "reader/ended-ctx",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 4)...)
				for _, c := range []struct{ group, call string }{{"", "FetchMessage"}, {"", "ReadMessage"}, {"g1", "FetchMessage"}, {"g2", "ReadMessage"}} {
					name := c.call + " " + c.group
					cfg := kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond}
					if c.group != "" {
						cfg.GroupID = s.Name(c.group)
						cfg.HeartbeatInterval, cfg.SessionTimeout, cfg.RebalanceTimeout = 500*time.Millisecond, 6*time.Second, 6*time.Second
					}
					r := s.NewReader("NewReader "+name, cfg)
					if r == nil {
						return
					}
					call := r.FetchMessage
					if c.call == "ReadMessage" {
						call = r.ReadMessage
					}
					ended, cancel := context.WithCancel(context.Background())
					cancel()
					s.FetchMessage(name+": FetchMessage", r)
					handed, shapes := 0, map[string]bool{}
					for range 20 {
						m, err := call(ended)
						if m.Value != nil {
							handed++
						}
						shapes[Shape(err)] = true
					}
					s.Note(name+": 20 calls on an ended ctx", fmt.Sprintf("handed out any=%v errors=%v", handed > 0, shapes))
					s.FetchMessageWithin(name+": FetchMessage after the ended ctx", 2*time.Second, r)
					s.CallNoCtx(name+": Close", r.Close)
				}
			},
		},
		{
			// Reads after Close while messages are fetched but not yet
			// handed out (row reads-after-close).
			Name:   "reader/fetch-after-close",
			Topics: map[string]int{"t": 1},
			Run: func(s *Side) {
				produce(s, "t", numbered(0, 6)...)
				for _, group := range []string{"", "g"} {
					cfg := kafka.ReaderConfig{Topic: s.Name("t"), MaxWait: 200 * time.Millisecond}
					if group != "" {
						cfg.GroupID = s.Name(group)
						cfg.HeartbeatInterval, cfg.SessionTimeout, cfg.RebalanceTimeout = 500*time.Millisecond, 6*time.Second, 6*time.Second
					}
					r := s.NewReader("NewReader "+group, cfg)
					if r == nil {
						return
					}
					s.FetchMessage("FetchMessage "+group, r)
					s.CallNoCtx("Close "+group, r.Close)
					s.FetchMessageWithin("FetchMessage after Close "+group, time.Second, r)
					s.FetchMessageWithin("FetchMessage after Close again "+group, time.Second, r)
				}
			},
		},
		{
			// A committed offset past the end of the log (a topic
			// recreated or truncated, a cluster failed over): kafka-go
			// waits there, for either StartOffset; with
			// OffsetOutOfRangeError see row oore-past-end-recovers.
			Name:   "reader/group/committed-past-end",
			Topics: map[string]int{"first": 1, "last": 1, "oore": 1},
			Run: func(s *Side) {
				for _, c := range []struct {
					topic string
					start int64
					oore  bool
				}{{"first", kafka.FirstOffset, false}, {"last", kafka.LastOffset, false}, {"oore", kafka.FirstOffset, true}} {
					produce(s, c.topic, numbered(0, 3)...)
					s.commitOffset(c.topic, c.topic, 0, 10)
					r := s.NewReader("NewReader "+c.topic, kafka.ReaderConfig{Topic: s.Name(c.topic), GroupID: s.Name(c.topic), MaxWait: 200 * time.Millisecond,
						StartOffset: c.start, OffsetOutOfRangeError: c.oore,
						HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second})
					if r == nil {
						return
					}
					s.FetchMessageWithin(c.topic+": FetchMessage waits", 3*time.Second, r)
					produce(s, c.topic, numbered(3, 15)...)
					s.FetchMessageWithin(c.topic+": FetchMessage once the log is past it", 10*time.Second, r)
					s.FetchMessageWithin(c.topic+": FetchMessage next", 10*time.Second, r)
					s.CallNoCtx("Close "+c.topic, r.Close)
					s.Committed(c.topic+": committed", c.topic, c.topic, 1)
				}
			},
		},
		{
			// A committed offset below the log's start (retention
			// deleted it while the group was down): both start at the
			// log's start, with OffsetOutOfRangeError too.
			Name:   "reader/group/committed-below-start",
			Topics: map[string]int{"t": 1, "oore": 1},
			Run: func(s *Side) {
				for _, c := range []struct {
					topic string
					oore  bool
				}{{"t", false}, {"oore", true}} {
					produce(s, c.topic, numbered(0, 6)...)
					s.commitOffset(c.topic, c.topic, 0, 1)
					s.deleteRecords(c.topic, 0, 4)
					r := s.NewReader("NewReader "+c.topic, kafka.ReaderConfig{Topic: s.Name(c.topic), GroupID: s.Name(c.topic), MaxWait: 200 * time.Millisecond,
						OffsetOutOfRangeError: c.oore,
						HeartbeatInterval:     500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second})
					if r == nil {
						return
					}
					s.FetchMessageWithin(c.topic+": FetchMessage", 10*time.Second, r)
					s.FetchMessageWithin(c.topic+": FetchMessage next", 10*time.Second, r)
					s.CallNoCtx("Close "+c.topic, r.Close)
				}
			},
		},
		{
			// Retention deletes the records a Reader is reading
			// (DeleteRecords past its position, one-record fetches):
			// both go on from the log's start, with
			// OffsetOutOfRangeError too, partition Reader and group
			// member alike. How many records each had fetched before
			// the deletion, and hands out after it, is its own.
			Name:   "reader/deleted-while-reading",
			Topics: map[string]int{"partition": 1, "partition-oore": 1, "group": 1, "group-oore": 1},
			Run: func(s *Side) {
				for _, c := range []struct {
					topic string
					group bool
					oore  bool
				}{{"partition", false, false}, {"partition-oore", false, true}, {"group", true, false}, {"group-oore", true, true}} {
					for i := 0; i < 20; i++ {
						produce(s, c.topic, numbered(i, i+1)...) // a batch each
					}
					cfg := kafka.ReaderConfig{Topic: s.Name(c.topic), MaxWait: 200 * time.Millisecond, MaxBytes: 1, QueueCapacity: 1,
						OffsetOutOfRangeError: c.oore}
					if c.group {
						cfg.GroupID = s.Name(c.topic)
						cfg.HeartbeatInterval, cfg.SessionTimeout, cfg.RebalanceTimeout = 500*time.Millisecond, 6*time.Second, 6*time.Second
					}
					r := s.NewReader("NewReader "+c.topic, cfg)
					if r == nil {
						return
					}
					s.FetchMessage(c.topic+": FetchMessage", r)
					s.deleteRecords(c.topic, 0, 15)
					errs, last, ordered := readOn(r, "k19", 40, 10*time.Second)
					s.Note(c.topic+": errors", errs)
					s.Note(c.topic+": last", last)
					s.Note(c.topic+": in order", ordered)
					s.CallNoCtx("Close "+c.topic, r.Close)
				}
			},
		},
		{
			// A broker answers a fetch OFFSET_OUT_OF_RANGE for the
			// offset a Reader reads next, which its log has or is
			// about to have: both ask again there, partition Reader
			// and group member alike, handing out nothing twice.
			Name:   "reader/out-of-range-answer",
			Topics: map[string]int{"partition": 1, "group": 1},
			Run: func(s *Side) {
				for _, c := range []struct {
					topic string
					group bool
				}{{"partition", false}, {"group", true}} {
					produce(s, c.topic, numbered(0, 10)...)
					cfg := kafka.ReaderConfig{Topic: s.Name(c.topic), MaxWait: 200 * time.Millisecond}
					if c.group {
						cfg.GroupID = s.Name(c.topic)
						cfg.HeartbeatInterval, cfg.SessionTimeout, cfg.RebalanceTimeout = 500*time.Millisecond, 6*time.Second, 6*time.Second
					}
					r := s.NewReader("NewReader "+c.topic, cfg)
					if r == nil {
						return
					}
					errs, last, ordered := readOn(r, "k9", 10, 10*time.Second)
					s.Note(c.topic+": first", fmt.Sprint(errs, last, ordered))
					if c.group {
						s.Call(c.topic+": CommitMessages", func(ctx context.Context) error {
							return r.CommitMessages(ctx, kafka.Message{Topic: s.Name(c.topic), Partition: 0, Offset: 9})
						})
					}
					s.Proxy().OnResponse(kproxy.FailFetches(1, 1, nil))
					produce(s, c.topic, numbered(10, 12)...)
					var keys []string
					for range 2 {
						m, err := s.FetchMessageWithin(c.topic+": FetchMessage", 10*time.Second, r)
						if err != nil {
							break
						}
						keys = append(keys, string(m.Key))
					}
					s.Proxy().OnResponse(nil)
					s.Note(c.topic+": next", strings.Join(keys, ","))
					s.CallNoCtx("Close "+c.topic, r.Close)
				}
			},
		},
	}
}

// readOn fetches from r until it hands out the message keyed last, at
// most n times, each within d, and returns how many fetches failed, the
// key of the last message handed out and whether their offsets rose.
func readOn(r Reader, last string, n int, d time.Duration) (errs int, key string, ordered bool) {
	ordered, prev := true, int64(-1)
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		m, err := r.FetchMessage(ctx)
		ended := ctx.Err() != nil
		cancel()
		if err != nil {
			errs++
			if ended {
				return errs, key, ordered
			}
			continue
		}
		if m.Offset <= prev {
			ordered = false
		}
		prev, key = m.Offset, string(m.Key)
		if key == last {
			break
		}
	}
	return errs, key, ordered
}

// commitOffset commits offset for the group named logically group on
// partition p of the topic named logical, from outside the group.
func (s *Side) commitOffset(group, logical string, p int32, offset int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := commitOffset(ctx, s.BrokerAddrs(), s.Name(group), s.Name(logical), p, offset); err != nil {
		s.T().Fatalf("%s: %v", s.Impl, err)
	}
}

// deleteRecords deletes the records below offset of partition p of the
// topic named logical.
func (s *Side) deleteRecords(logical string, p int32, offset int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := deleteRecords(ctx, s.BrokerAddrs(), s.Name(logical), p, offset); err != nil {
		s.T().Fatalf("%s: %v", s.Impl, err)
	}
}

// holdProduce makes the side's proxy hold every Produce request until the
// scenario ends, then close its connection (the broker never sees it). The
// channel it returns is closed at the first one held.
func holdProduce(s *Side) <-chan struct{} {
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	s.addCloser(func() { close(release) }) // when the scenario ends, before the proxy stops
	s.Proxy().OnRequest(func(r kproxy.Request) kproxy.Action {
		if r.Key != 0 {
			return kproxy.Forward
		}
		once.Do(func() { close(held) })
		<-release
		return kproxy.CloseBefore
	})
	return held
}

// growTopic gives the topic named logical n partitions, then lets five
// metadata refreshes of ttl pass (both sides' Writers refresh every ttl).
func growTopic(s *Side, logical string, n int, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Cluster().AddPartitions(ctx, s.Name(logical), n); err != nil {
		s.T().Fatal(err)
	}
	time.Sleep(5 * ttl)
}

// writeOnce builds a Writer of the side's like w, which the SDK may
// refuse, and records at step "new error", or what one call of one
// message returned.
func writeOnce(s *Side, step string, w *kafka.Writer) {
	got, err := s.f.NewWriter(w)
	if err != nil {
		s.Note(step, "new error")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.patience)
	err = got.WriteMessages(ctx, kafka.Message{Value: []byte("x")})
	cancel()
	got.Close()
	s.Note(step, "write "+Shape(err))
}

// wrappedTransport is a kafka.RoundTripper of a program's own, around
// kafka-go's Transport.
type wrappedTransport struct{ t *kafka.Transport }

func (w wrappedTransport) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	return w.t.RoundTrip(ctx, addr, req)
}

// numbered returns messages "m<i>" for i in [from, to).
func numbered(from, to int) []kafka.Message {
	var out []kafka.Message
	for i := from; i < to; i++ {
		out = append(out, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("m%d", i))})
	}
	return out
}

// produce writes msgs to the logical topic with kafka-go's own client,
// straight to the broker, in partition 0 (a setup step, not observed).
func produce(s *Side, logical string, msgs ...kafka.Message) { produceTo(s, logical, 0, msgs...) }

// produceTo is produce to partition p.
func produceTo(s *Side, logical string, p int, msgs ...kafka.Message) {
	w := &kafka.Writer{Addr: kafka.TCP(s.BrokerAddrs()...), Topic: s.Name(logical), RequiredAcks: kafka.RequireAll,
		Balancer: fixedPartition(p), BatchTimeout: time.Millisecond, Transport: &kafka.Transport{}}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		s.t.Fatalf("%s: producing to %s (%s): %v", s.Impl, logical, s.Name(logical), err)
	}
}

// produceTxn writes one transaction of messages keyed and valued by keys
// to the logical topic's partition 0, straight to the broker with
// franz-go's client, and commits or aborts it (a setup step).
func produceTxn(s *Side, logical string, commit bool, keys ...string) {
	openTxn(s, logical, keys...)(commit)
}

// openTxn writes records keyed keys to the logical topic's partition 0 in
// a transaction it leaves open, and returns the end of it: a commit, or
// an abort.
func openTxn(s *Side, logical string, keys ...string) (end func(commit bool)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.BrokerAddrs()...), kgo.TransactionalID(fmt.Sprintf("difftest-%d", time.Now().UnixNano())),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		s.t.Fatal(err)
	}
	for _, k := range keys {
		rec := &kgo.Record{Topic: s.Name(logical), Key: []byte(k), Value: []byte(k)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			cl.Close()
			s.t.Fatalf("%s: producing to %s in a transaction: %v", s.Impl, logical, err)
		}
	}
	return func(commit bool) {
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			s.t.Fatalf("%s: ending a transaction on %s: %v", s.Impl, logical, err)
		}
	}
}

// isolationName is iso as Kafka names it.
func isolationName(iso kafka.IsolationLevel) string {
	if iso == kafka.ReadCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}

// passMarker reads from r with read (FetchMessage or ReadMessage) until
// past says the Reader is past the transaction marker that follows what
// it read, or the patience ends; it records nothing, as kafka-go hands
// the marker out and the SDK passes it over (its read waits for ctx).
func passMarker(s *Side, read func(context.Context) (kafka.Message, error), past func() bool) {
	deadline := time.Now().Add(s.patience)
	for !past() && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		read(ctx)
		cancel()
	}
}

// readUntil fetches from r until a message keyed last, and returns the
// keys it read, quoted, or where it stopped. Not the offsets: where the
// cluster writes a transaction's markers among the next records differs
// from side to side.
func readUntil(s *Side, r Reader, last string) string {
	var got []string
	for len(got) < 20 {
		ctx, cancel := context.WithTimeout(context.Background(), s.patience)
		m, err := r.FetchMessage(ctx)
		cancel()
		if err != nil {
			return strings.Join(append(got, "error "+Shape(err)), ", ")
		}
		got = append(got, fmt.Sprintf("%q", m.Key))
		if string(m.Key) == last {
			break
		}
	}
	return strings.Join(got, ", ")
}

// fixedPartition balances every message to itself.
type fixedPartition int

func (p fixedPartition) Balance(kafka.Message, ...int) int { return int(p) }
