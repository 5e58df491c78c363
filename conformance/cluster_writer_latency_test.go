//go:build conformance

package conformance

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/azkafka/azkafka/sdk"
)

// TestClusterWriterLatency compares the Writers of TestClusterFailover
// without its events, its Reader or a second Writer alongside: raw
// kafka.Writer, the sdk.Writer idempotent and at least once, and franz-go,
// then raw and sdk again with an sdk.Reader of their topic alongside, one
// after another, each 12 goroutines of synchronous calls of 4 keyed
// messages to their own partition, acks=all, SASL_SSL, 3 nodes; two
// rounds; it logs each one's calls per 5 s and call latency. It runs only
// when asked for (a measurement, not a check):
//
//	AZKAFKA_CONFORMANCE_CLUSTER_LATENCY=1 CONFORMANCE_RUN=TestClusterWriterLatency ./conformance/run.sh
func TestClusterWriterLatency(t *testing.T) {
	if os.Getenv("AZKAFKA_CONFORMANCE_CLUSTER_LATENCY") == "" {
		t.Skip("AZKAFKA_CONFORMANCE_CLUSTER_LATENCY=1 runs the measurement")
	}
	sc := startSecureCluster(t)
	c, trusted, mech, secure := sc.c, sc.tls, sc.mech, sc.addrs
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for round := 0; round < 2; round++ {
		for _, name := range []string{"raw", "sdk", "sdk-alo", "franz", "raw+reader", "sdk+reader"} {
			topic := strings.ReplaceAll(name, "+", "-") + "-" + randomToken(t)[:6]
			c.CreateTopic(ctx, topic, 12)
			var write func(context.Context, ...kafka.Message) error
			var closer func()
			var stopReader func()
			if strings.HasSuffix(name, "+reader") {
				// A group Reader of the topic alongside, as in
				// TestClusterFailover.
				r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: secure, GroupID: topic, Topic: topic,
					Dialer:      &kafka.Dialer{Timeout: 10 * time.Second, TLS: trusted, SASLMechanism: mech},
					StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond}, sdkcOptions()...)
				if err != nil {
					t.Fatal(err)
				}
				rctx, rcancel := context.WithCancel(ctx)
				rdone := make(chan struct{})
				go func() {
					defer close(rdone)
					for rctx.Err() == nil {
						if _, err := r.ReadMessage(rctx); err != nil && rctx.Err() == nil {
							t.Errorf("reader: %v", err)
							return
						}
					}
				}()
				stopReader = func() { rcancel(); <-rdone; r.Close() }
			}
			switch strings.TrimSuffix(name, "+reader") {
			case "raw":
				tr := &kafka.Transport{TLS: trusted, SASL: mech}
				w := &kafka.Writer{Addr: kafka.TCP(secure...), Topic: topic, RequiredAcks: kafka.RequireAll, Balancer: keyPartition{}, BatchTimeout: 5 * time.Millisecond, Transport: tr}
				write, closer = w.WriteMessages, func() { w.Close() }
			case "sdk", "sdk-alo":
				tr := &kafka.Transport{TLS: trusted, SASL: mech}
				w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(secure...), Topic: topic, RequiredAcks: kafka.RequireAll, Balancer: keyPartition{}, BatchTimeout: 5 * time.Millisecond, Transport: tr},
					append(sdkcOptions(), sdk.WithIdempotence(name == "sdk"))...)
				if err != nil {
					t.Fatal(err)
				}
				write, closer = w.WriteMessages, func() { w.Close() }
			case "franz":
				cl, err := kgo.NewClient(kgo.SeedBrokers(secure...), kgo.DialTLSConfig(trusted), kgo.SASL(kscram.Auth{User: "alice", Pass: sc.pass}.AsSha512Mechanism()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
				if err != nil {
					t.Fatal(err)
				}
				write = func(ctx context.Context, msgs ...kafka.Message) error {
					recs := make([]*kgo.Record, len(msgs))
					for i := range msgs {
						recs[i] = &kgo.Record{Key: msgs[i].Key, Value: msgs[i].Value, Partition: int32(keyPartition{}.Balance(msgs[i]))}
					}
					return cl.ProduceSync(ctx, recs...).FirstErr()
				}
				closer = cl.Close
			}
			p := &failoverProducer{name: name, write: write}
			pctx, pcancel := context.WithCancel(ctx)
			done := make(chan struct{})
			for part := range 12 {
				go func() { p.run(pctx, part, 4); done <- struct{}{} }()
			}
			if !waitUntil(time.Minute, func() bool { return p.acked.Load() >= 500 }) {
				t.Fatalf("%s: %d acknowledged in a minute", name, p.acked.Load())
			}
			from := time.Now()
			time.Sleep(5 * time.Second)
			to := time.Now()
			p.stop.Store(true)
			for range 12 {
				<-done
			}
			pcancel()
			closer()
			if stopReader != nil {
				stopReader()
			}
			n, p50, p99 := p.callsBetween(from, to)
			t.Logf("round %d, %s: %d calls of 4 in 5 s (%.0f messages/s), call p50 %v, p99 %v", round+1, name, n, float64(4*n)/to.Sub(from).Seconds(), p50, p99)
		}
	}
}
