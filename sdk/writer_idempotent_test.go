package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// partitionValues reads the values of every partition of the rig's topic
// from the broker, in offset order.
func (r *faultRig) partitionValues(t testing.TB) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return deliverytest.PartitionValues(ctx, t, r.checkTopic())
}

// requireOrder checks that, in every partition, the messages handed to
// the Writer in a known order were stored in that order. Messages are
// known by their index in deliverytest.Messages; group(index) names the
// sequence they were handed over in (a call, or the whole run when calls
// were made one after another), whose indexes increase.
func requireOrder(t testing.TB, parts [][]string, group func(index int) int) {
	t.Helper()
	for p, vals := range parts {
		last := map[int]int{}
		for pos, v := range vals {
			i := messageIndex(v)
			g := group(i)
			if prev, ok := last[g]; ok && i < prev {
				t.Fatalf("partition %d: message %d stored at position %d after message %d of the same sequence", p, i, pos, prev)
			}
			last[g] = i
		}
	}
}

// messageIndex is the index in deliverytest.Messages of value v.
func messageIndex(v string) int {
	n, _ := strconv.Atoi(v[strings.LastIndexByte(v, '-')+1:])
	return n
}

// TestIdempotentWriterKeepsOrderThroughLostResponses writes in sync
// calls made one after another and in async mode, while every 3rd Produce request is handled by the
// broker and its response dropped: every message is stored once, and each
// partition holds its messages in the order they were handed over.
func TestIdempotentWriterKeepsOrderThroughLostResponses(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			t.Parallel()
			rig := newFaultRig(t, "order", 3)
			var injected atomic.Int64
			rig.proxy.OnRequest(deliverytest.EveryNth(3, 30, kproxy.CloseAfter, &injected, keyProduce))
			var completed atomic.Int64
			w, err := sdk.NewWriter(&kafka.Writer{
				Addr:         kafka.TCP(rig.proxy.Addr()),
				Topic:        rig.topic,
				RequiredAcks: kafka.RequireAll,
				BatchTimeout: 2 * time.Millisecond,
				Async:        async,
				Completion: func(msgs []kafka.Message, err error) {
					if err != nil {
						t.Errorf("Completion: %d messages failed: %v", len(msgs), err)
					}
					completed.Add(int64(len(msgs)))
				},
			}, testOptions(t)...)
			if err != nil {
				t.Fatal(err)
			}
			sent := deliverytest.Messages("o", 1500)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for off := 0; off < len(sent); off += 50 {
				if err := w.WriteMessages(ctx, sent[off:off+50]...); err != nil {
					t.Fatalf("WriteMessages [%d:%d]: %v", off, off+50, err)
				}
				if async {
					time.Sleep(5 * time.Millisecond) // past BatchTimeout: one request per call or so
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			st := w.Stats()
			lost, dups := deliverytest.LostAndDuplicated(sent, rig.consumeAll(t))
			t.Logf("responses dropped %d: lost %d, duplicates %d; retries %d, epoch bumps %d",
				injected.Load(), lost, dups, st.SDK.Retries, st.SDK.EpochBumps)
			if injected.Load() == 0 {
				t.Fatal("no response was dropped: the test proves nothing")
			}
			if lost != 0 || dups != 0 {
				t.Fatalf("lost %d, duplicates %d; want 0 and 0", lost, dups)
			}
			if completed.Load() != int64(len(sent)) {
				t.Errorf("Completion reported %d messages, want %d", completed.Load(), len(sent))
			}
			if st.SDK.Retries == 0 || !st.SDK.Idempotent || st.SDK.ProducerID < 0 {
				t.Errorf("stats %+v: want the resent requests counted, a producer ID", st.SDK)
			}
			// Every call was made after the previous one returned (in
			// async mode: was queued), so index order is hand-over order.
			requireOrder(t, rig.partitionValues(t), func(int) int { return 0 })
		})
	}
}

// TestIdempotenceSetting checks when the Writer is idempotent: auto (on
// with RequireAll only), the variable, the option winning over it, and
// NewWriter's error for an explicit on with other acks.
func TestIdempotenceSetting(t *testing.T) {
	rig := newFaultRig(t, "setting", 1)
	for _, tc := range []struct {
		name    string
		acks    kafka.RequiredAcks
		env     string
		opt     *bool
		want    bool
		wantErr string
	}{
		{name: "auto, acks all", acks: kafka.RequireAll, want: true},
		{name: "auto, acks one", acks: kafka.RequireOne, want: false},
		{name: "auto, acks none", acks: kafka.RequireNone, want: false},
		{name: "env auto", acks: kafka.RequireAll, env: "auto", want: true},
		{name: "env false", acks: kafka.RequireAll, env: "false", want: false},
		{name: "env true", acks: kafka.RequireAll, env: "true", want: true},
		{name: "env true, acks one", acks: kafka.RequireOne, env: "TRUE", wantErr: `AZKAFKA_IDEMPOTENCE=TRUE needs kafka.Writer.RequiredAcks = kafka.RequireAll (it is RequireOne)`},
		{name: "option true, acks none", acks: kafka.RequireNone, opt: ptr(true), wantErr: `WithIdempotence(true) needs kafka.Writer.RequiredAcks = kafka.RequireAll (it is RequireNone`},
		{name: "option false wins over env", acks: kafka.RequireAll, env: "true", opt: ptr(false), want: false},
		{name: "env invalid", acks: kafka.RequireAll, env: "yes please", wantErr: `AZKAFKA_IDEMPOTENCE="yes please": want auto, true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(t, sdk.WithGetenv(func(name string) string {
				if name == sdk.EnvIdempotence {
					return tc.env
				}
				return ""
			}))
			if tc.opt != nil {
				opts = append(opts, sdk.WithIdempotence(*tc.opt))
			}
			w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic, RequiredAcks: tc.acks}, opts...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewWriter error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if got := w.Stats().SDK.Idempotent; got != tc.want {
				t.Fatalf("Idempotent = %v, want %v", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// refuseInitProducerID is a kproxy response hook that turns every
// InitProducerId answer into CLUSTER_AUTHORIZATION_FAILED, as Kafka
// answers a principal with neither IdempotentWrite on the cluster nor
// Write on a topic.
func refuseInitProducerID(req kproxy.Request, resp []byte) []byte {
	if req.Key != 22 {
		return resp
	}
	r, err := kproxy.DecodeResponse(req, resp)
	if err != nil {
		return resp
	}
	ir := r.(*kmsg.InitProducerIDResponse)
	ir.ErrorCode, ir.ProducerID, ir.ProducerEpoch = int16(kafka.ClusterAuthorizationFailed), -1, -1
	return kproxy.EncodeResponse(req, ir)
}

// TestIdempotentWriterInitRefused: under auto, a refused producer ID
// means one warning naming the cause and at-least-once writes; under an
// explicit true, WriteMessages returns the refusal and nothing is written.
func TestIdempotentWriterInitRefused(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		t.Run(fmt.Sprintf("explicit=%v", explicit), func(t *testing.T) {
			t.Parallel()
			rig := newFaultRig(t, "refused", 2)
			rig.proxy.OnResponse(refuseInitProducerID)
			var logs deliverytest.LogBuffer
			opts := testOptions(t, sdk.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			if explicit {
				opts = append(opts, sdk.WithIdempotence(true))
			}
			w, err := sdk.NewWriter(&kafka.Writer{
				Addr:         kafka.TCP(rig.proxy.Addr()),
				Topic:        rig.topic,
				RequiredAcks: kafka.RequireAll,
				BatchTimeout: time.Millisecond,
			}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			sent := deliverytest.Messages("r", 20)
			for off := 0; off < len(sent); off += 10 {
				err = w.WriteMessages(ctx, sent[off:off+10]...)
				if explicit {
					if !errors.Is(err, kafka.ClusterAuthorizationFailed) || !strings.Contains(err.Error(), "WithIdempotence(true)") {
						t.Fatalf("WriteMessages: %v, want the refusal naming WithIdempotence(true)", err)
					}
				} else if err != nil {
					t.Fatalf("WriteMessages under auto: %v", err)
				}
			}
			counts := rig.consumeAll(t)
			warnings := strings.Count(logs.String(), "refused a producer ID")
			if explicit {
				if len(counts) != 0 || warnings != 0 {
					t.Fatalf("explicit true: %d values stored, %d fallback warnings; want none", len(counts), warnings)
				}
				return
			}
			if lost, _ := deliverytest.LostAndDuplicated(sent, counts); lost != 0 {
				t.Fatalf("auto: %d of %d messages lost after the fallback", lost, len(sent))
			}
			if warnings != 1 || !strings.Contains(logs.String(), "Cluster Authorization Failed") {
				t.Fatalf("auto: %d warnings, want one naming the cause; log:\n%s", warnings, logs.String())
			}
			if w.Stats().SDK.Idempotent {
				t.Fatal("auto after a refusal: Stats says idempotent")
			}
		})
	}
}

// TestIdempotentWriterFollowsLeaderMoves moves every partition's leader
// to another broker of a 3-broker embedded cluster before every 5th of
// the sync calls made one after another: the Writer's cached metadata
// still names the old leader, which refuses the batches
// (NOT_LEADER_OR_FOLLOWER); they are resent, unchanged, to the new one.
// Every message is stored once, in hand-over order.
func TestIdempotentWriterFollowsLeaderMoves(t *testing.T) {
	t.Parallel()
	const parts = 3
	c := embedded.StartT(t, embedded.Brokers(3), embedded.Topic("moves", parts))
	rig := &faultRig{broker: c, topic: "moves", parts: parts}
	// misdirected counts Produce requests that reached a broker which no
	// longer leads one of their partitions: each batch of them is
	// refused (NOT_LEADER_OR_FOLLOWER) and resent.
	var leaders [parts]atomic.Int32
	for p := range leaders {
		leaders[p].Store(c.Kfake().LeaderFor("moves", int32(p)))
	}
	var misdirected atomic.Int64
	c.Kfake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Kfake().KeepControl()
		node := c.Kfake().CurrentNode()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			for _, pp := range tp.Partitions {
				if leaders[pp.Partition].Load() != node {
					misdirected.Add(1)
					return nil, nil, false
				}
			}
		}
		return nil, nil, false
	})
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(c.Addrs()...),
		Topic:        rig.topic,
		RequiredAcks: kafka.RequireAll,
	}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	sent := deliverytest.Messages("lm", 3000)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	moves := 0
	for call, off := 0, 0; off < len(sent); call, off = call+1, off+30 {
		if call%5 == 4 {
			moves++
			for p := int32(0); p < parts; p++ {
				to := int32(moves+int(p)) % 3
				if err := c.Kfake().MoveTopicPartition(rig.topic, p, to); err != nil {
					t.Fatal(err)
				}
				leaders[p].Store(to)
			}
		}
		if err := w.WriteMessages(ctx, sent[off:off+30]...); err != nil {
			t.Fatalf("WriteMessages [%d:%d]: %v", off, off+30, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	lost, dups := deliverytest.LostAndDuplicated(sent, rig.consumeAll(t))
	t.Logf("leader moves %d: lost %d, duplicates %d; produce requests to a former leader %d, epoch bumps %d", moves, lost, dups, misdirected.Load(), st.SDK.EpochBumps)
	if misdirected.Load() == 0 {
		t.Fatalf("%d leader moves and no produce request reached a former leader: the test proves nothing", moves)
	}
	if lost != 0 || dups != 0 {
		t.Fatalf("lost %d, duplicates %d; want 0 and 0", lost, dups)
	}
	requireOrder(t, rig.partitionValues(t), func(int) int { return 0 })
}

// TestIdempotentWriterKeepsKafkaGoSemantics: per-message topics, headers,
// keys, compression and automatic topic creation behave as with
// kafka.Writer on the idempotent path; a message with both or neither
// topic is kafka-go's error, and a message larger than BatchBytes is a
// kafka.MessageTooLargeError.
func TestIdempotentWriterKeepsKafkaGoSemantics(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.KfakeOptions(kfake.AllowAutoTopicCreation()))
	for _, codec := range []kafka.Compression{0, kafka.Gzip, kafka.Snappy, kafka.Lz4, kafka.Zstd} {
		t.Run(fmt.Sprintf("compression=%d", codec), func(t *testing.T) {
			created := fmt.Sprintf("sem-new-%d", codec)
			topic := fmt.Sprintf("sem-%d", codec)
			if err := c.CreateTopic(context.Background(), topic, 2); err != nil {
				t.Fatal(err)
			}
			w, err := sdk.NewWriter(&kafka.Writer{
				Addr:                   kafka.TCP(c.Addrs()...),
				RequiredAcks:           kafka.RequireAll,
				Compression:            codec,
				AllowAutoTopicCreation: true,
				Balancer:               &kafka.Hash{},
				BatchBytes:             4096,
			}, testOptions(t)...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			msgs := []kafka.Message{
				{Topic: topic, Key: []byte("k1"), Value: []byte("v1"), Headers: []kafka.Header{{Key: "h", Value: []byte("1")}}},
				{Topic: created, Key: []byte("k2"), Value: []byte("v2")},
				{Topic: topic, Key: []byte("k1"), Value: []byte("v3")},
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
			if !w.Stats().SDK.Idempotent {
				t.Fatal("not idempotent")
			}
			// Same key, same partition, in order, with its header.
			p := (&kafka.Hash{}).Balance(msgs[0], 0, 1)
			conn, err := kafka.DialLeader(ctx, "tcp", c.Addrs()[0], topic, p)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			batch := conn.ReadBatch(1, 1<<20)
			var got []string
			for {
				m, err := batch.ReadMessage()
				if err != nil {
					break
				}
				if string(m.Value) == "v1" && (len(m.Headers) != 1 || m.Headers[0].Key != "h" || string(m.Headers[0].Value) != "1") {
					t.Errorf("v1 headers %v", m.Headers)
				}
				got = append(got, string(m.Key)+"="+string(m.Value))
			}
			batch.Close()
			if fmt.Sprint(got) != "[k1=v1 k1=v3]" {
				t.Fatalf("%s partition %d holds %v ", topic, p, got)
			}
			ctl, err := kafka.DialContext(ctx, "tcp", c.Addrs()[0])
			if err != nil {
				t.Fatal(err)
			}
			defer ctl.Close()
			pts, err := ctl.ReadPartitions(created)
			if err != nil || len(pts) == 0 {
				t.Fatalf("auto-created topic %s: %v, %d partitions", created, err, len(pts))
			}
			counts := deliverytest.ConsumeAll(ctx, t, deliverytest.Topic{Addrs: c.Addrs(), Name: created, Partitions: len(pts)})
			if len(counts) != 1 || counts["v2"] != 1 {
				t.Fatalf("auto-created topic %s holds %v, want v2 once", created, counts)
			}

			both := kafka.Message{Topic: topic, Value: []byte("x")}
			wt, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: topic, RequiredAcks: kafka.RequireAll}, testOptions(t)...)
			if err != nil {
				t.Fatal(err)
			}
			defer wt.Close()
			if err := wt.WriteMessages(ctx, both); err == nil || !strings.Contains(err.Error(), "must not be specified for both") {
				t.Errorf("topic on Writer and message: %v", err)
			}
			if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("x")}); err == nil || !strings.Contains(err.Error(), "must be specified") {
				t.Errorf("no topic: %v", err)
			}
			var tooLarge kafka.MessageTooLargeError
			big := kafka.Message{Topic: topic, Value: make([]byte, 5000)}
			if err := w.WriteMessages(ctx, msgs[0], big); !errors.As(err, &tooLarge) || len(tooLarge.Remaining) != 1 {
				t.Errorf("5000-byte message with BatchBytes 4096: %v", err)
			}
		})
	}
}
