package sdk_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// TestReaderHealthyRunIsQuiet: on a healthy broker, moving a partition
// Reader with SetOffset and closing Readers of both modes is no transient
// error: nothing is counted in Stats().SDK.TransientErrors, nothing is
// logged at Info or above (where the SDK reports what it absorbed), and a
// later ctx error names no cause.
func TestReaderHealthyRunIsQuiet(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		t.Run(map[bool]string{false: "partition", true: "group"}[group], func(t *testing.T) {
			t.Parallel()
			c := embedded.StartT(t, embedded.Topic("quiet", 1))
			w := &kafka.Writer{Transport: ownTransport(t), Addr: kafka.TCP(c.Addrs()...), Topic: "quiet", RequiredAcks: kafka.RequireAll, BatchSize: 5, BatchTimeout: time.Millisecond}
			if err := w.WriteMessages(testCtx(t), deliverytest.Messages("q", 40)...); err != nil {
				t.Fatal(err)
			}
			w.Close()
			cfg := kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "quiet", MaxWait: 200 * time.Millisecond, MaxBytes: 256}
			if group {
				cfg.GroupID = "quiet"
				cfg.HeartbeatInterval = 100 * time.Millisecond
			}
			var logs deliverytest.LogBuffer
			r, err := sdk.NewReader(cfg, testOptions(t, sdk.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))...)
			if err != nil {
				t.Fatal(err)
			}
			read := func(n int) {
				t.Helper()
				for range n {
					if _, err := r.FetchMessage(testCtx(t)); err != nil {
						t.Fatal(err)
					}
				}
			}
			read(20)
			if !group {
				for _, o := range []int64{3, 30, 1} {
					if err := r.SetOffset(o); err != nil {
						t.Fatal(err)
					}
					read(1)
				}
				if err := r.SetOffset(20); err != nil {
					t.Fatal(err)
				}
			}
			read(20)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, err = r.FetchMessage(ctx) // the topic is read: waits out ctx
			cancel()
			st := r.Stats()
			if cerr := r.Close(); cerr != nil {
				t.Errorf("Close: %v", cerr)
			}
			t.Logf("at the end of the topic: %v; transient errors %d; logged: %q", err, st.SDK.TransientErrors, logs.String())
			if st.SDK.TransientErrors != 0 {
				t.Errorf("Stats().SDK.TransientErrors = %d on a healthy broker", st.SDK.TransientErrors)
			}
			if err == nil || err.Error() != context.DeadlineExceeded.Error() {
				t.Errorf("FetchMessage at the end of the topic = %v, want the bare %v", err, context.DeadlineExceeded)
			}
			if logs.String() != "" {
				t.Errorf("logged at Info or above on a healthy run: %s", logs.String())
			}
		})
	}
}

// TestReaderConsumerProtocolNeedsTheBroker: a Reader asked for KIP-848's
// consumer protocol on a broker without it (Kafka 3.9's API versions)
// still joins the group, which then is a classic group: Stats must say
// which protocol the group runs, not which was asked for.
func TestReaderConsumerProtocolNeedsTheBroker(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("old", 2), embedded.KfakeOptions(kfake.MaxVersions(kversion.V3_9_0())))
	w := &kafka.Writer{Transport: ownTransport(t), Addr: kafka.TCP(c.Addrs()...), Topic: "old", RequiredAcks: kafka.RequireAll}
	if err := w.WriteMessages(testCtx(t), deliverytest.Messages("old", 4)...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: "old", Topic: "old", MaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond}, testOptions(t, sdk.WithGroupProtocol(sdk.GroupProtocolConsumer))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatalf("FetchMessage: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"old"}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("DescribeGroups: %v", err)
	}
	g := resp.Groups[0]
	st := r.Stats().SDK
	t.Logf("read %d/%d; the broker describes the group: error code %d, protocol type %q, protocol %q, %d members; Stats().SDK.GroupProtocol %q",
		m.Partition, m.Offset, g.ErrorCode, g.ProtocolType, g.Protocol, len(g.Members), st.GroupProtocol)
	if g.ErrorCode != 0 || g.ProtocolType != "consumer" || len(g.Members) != 1 {
		t.Fatalf("the broker does not hold a classic consumer group with the Reader")
	}
	if st.GroupProtocol != sdk.GroupProtocolClassic {
		t.Errorf("Stats().SDK.GroupProtocol = %q while the group runs the classic protocol", st.GroupProtocol)
	}
}
