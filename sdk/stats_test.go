package sdk_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/internal/testkit/metricstest"
	"github.com/azkafka/azkafka/sdk"
)

// TestWriterStats checks Writer.Stats: identity fields, counters that
// match the faults injected (two produce requests lost: two retries, each
// message counted once, when acknowledged), and kafka-go's since-last-call
// semantics for the event counters.
func TestWriterStats(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "stats", 1)
	p := metricstest.New()
	var injected atomic.Int64
	// Exactly two Produce requests are closed before the broker sees them.
	rig.proxy.OnRequest(func(r kproxy.Request) kproxy.Action {
		if r.Key == 0 && injected.Load() < 2 {
			injected.Add(1)
			return kproxy.CloseBefore
		}
		return kproxy.Forward
	})
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(rig.proxy.Addr()),
		Topic:        rig.topic,
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond,
	}, testOptions(t, sdk.WithClientID("billing"), sdk.WithMetrics(p))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, deliverytest.Messages("s", 5)...); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"SDK.Retries", st.SDK.Retries, int64(2)},
		{"Retries (kafka-go field)", st.Retries, int64(2)},
		{"SDK.TransientErrors >= 2", st.SDK.TransientErrors >= 2, true},
		{"SDK.AZ", st.SDK.AZ, "az-a"},
		{"SDK.AZSource", st.SDK.AZSource, "option"},
		// Messages acknowledged, once each; the two lost requests are
		// Retries.
		{"Messages", st.Messages, int64(5)},
		{"Writes (acknowledged produce requests) >= 1", st.Writes >= 1, true},
		{"Errors", st.Errors, int64(0)},
		{"RequiredAcks", st.RequiredAcks, int64(kafka.RequireAll)},
		{"SDK.Idempotent", st.SDK.Idempotent, true},
		{"SDK.EpochBumps", st.SDK.EpochBumps, int64(0)},
		{"SDK.ProducerID >= 0", st.SDK.ProducerID >= 0, true},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !strings.HasPrefix(st.SDK.ClientID, "billing,warpstream_session_id=") || !strings.Contains(st.SDK.ClientID, "warpstream_az=az-a") {
		t.Errorf("SDK.ClientID = %q, want the user ID first and the AZ pair", st.SDK.ClientID)
	}
	if st.SDK.Conn.ConnectionsCreated < 2 {
		t.Errorf("SDK.Conn.ConnectionsCreated = %d, want at least 2 (the first connection was closed)", st.SDK.Conn.ConnectionsCreated)
	}
	// The same events, as the Recorder heard them.
	rec := p.Only(t)
	if n := rec.Count("resent connection"); n != 2 {
		t.Errorf("Resent(ResendConnection) reported %d times, want 2", n)
	}
	absorbed := int64(0)
	for k, n := range rec.Counts() {
		if strings.HasPrefix(k, "absorbed ") {
			absorbed += n
		}
	}
	if absorbed < st.SDK.TransientErrors || rec.Count("closed peer")+rec.Count("closed peer_early") < 2 {
		t.Errorf("absorbed %d (Stats: %d), peer closes %v: want every absorbed error and both cut connections", absorbed, st.SDK.TransientErrors, rec.Counts())
	}
	again := w.Stats()
	if again.SDK.Retries != 0 || again.Writes != 0 || again.Messages != 0 {
		t.Errorf("second Stats call: retries %d, writes %d, messages %d; want counters since the previous call (0)",
			again.SDK.Retries, again.Writes, again.Messages)
	}
	if again.SDK.ProducerID != st.SDK.ProducerID || again.SDK.EpochBumps != 0 {
		t.Errorf("second Stats call: producer ID %d (was %d), epoch bumps %d; want the same ID, no bump",
			again.SDK.ProducerID, st.SDK.ProducerID, again.SDK.EpochBumps)
	}
	if again.SDK.Conn.ConnectionsCreated < st.SDK.Conn.ConnectionsCreated {
		t.Errorf("connection counters went down (%d -> %d); they are cumulative", st.SDK.Conn.ConnectionsCreated, again.SDK.Conn.ConnectionsCreated)
	}
}

// TestMethodSetsMatchKafkaGo: sdk.Writer and sdk.Reader have every method
// of *kafka.Writer and *kafka.Reader, with the same parameters and
// results, except that Stats returns the SDK's stats type embedding
// kafka-go's.
func TestMethodSetsMatchKafkaGo(t *testing.T) {
	for _, tc := range []struct {
		kafka, sdk reflect.Type
		stats      reflect.Type // kafka-go's Stats result, embedded in ours
	}{
		{reflect.TypeFor[*kafka.Writer](), reflect.TypeFor[*sdk.Writer](), reflect.TypeFor[kafka.WriterStats]()},
		{reflect.TypeFor[*kafka.Reader](), reflect.TypeFor[*sdk.Reader](), reflect.TypeFor[kafka.ReaderStats]()},
	} {
		for i := 0; i < tc.kafka.NumMethod(); i++ {
			km := tc.kafka.Method(i)
			sm, ok := tc.sdk.MethodByName(km.Name)
			if !ok {
				t.Errorf("%v lacks %s", tc.sdk, km.Name)
				continue
			}
			kt, st := km.Type, sm.Type
			if kt.NumIn() != st.NumIn() || kt.NumOut() != st.NumOut() || kt.IsVariadic() != st.IsVariadic() {
				t.Errorf("%v.%s is %v, kafka-go's is %v", tc.sdk, km.Name, st, kt)
				continue
			}
			for j := 1; j < kt.NumIn(); j++ { // 0 is the receiver
				if kt.In(j) != st.In(j) {
					t.Errorf("%v.%s parameter %d is %v, kafka-go's is %v", tc.sdk, km.Name, j, st.In(j), kt.In(j))
				}
			}
			for j := 0; j < kt.NumOut(); j++ {
				out := st.Out(j)
				if km.Name == "Stats" {
					f, ok := out.FieldByName(tc.stats.Name())
					if !ok || !f.Anonymous || f.Type != tc.stats {
						t.Errorf("%v.Stats returns %v, which does not embed %v", tc.sdk, out, tc.stats)
					}
					continue
				}
				if kt.Out(j) != out {
					t.Errorf("%v.%s result %d is %v, kafka-go's is %v", tc.sdk, km.Name, j, out, kt.Out(j))
				}
			}
		}
	}
}

// TestWriterStatsTimes: WriteTime is each produce request's round trip
// and WaitTime the time brokers throttled the Writer for, as kafka-go's
// Writer counts them (its produce call, a response's throttle time): a
// broker that answers each produce request after 30 ms and throttles
// nothing gives a WriteTime of at least 30 ms and no WaitTime.
func TestWriterStatsTimes(t *testing.T) {
	const delay = 30 * time.Millisecond
	rig := newFaultRig(t, "stats-times", 1)
	rig.proxy.OnResponse(func(r kproxy.Request, resp []byte) []byte {
		if r.Key == int16(kmsg.Produce) {
			time.Sleep(delay)
		}
		return resp
	})
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic, RequiredAcks: kafka.RequireAll}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 3 {
		if err := w.WriteMessages(testCtx(t), kafka.Message{Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	st := w.Stats()
	if st.WriteTime.Count == 0 || st.WriteTime.Min < delay {
		t.Errorf("WriteTime %+v, want every produce request's round trip, at least %v", st.WriteTime, delay)
	}
	if st.WaitTime.Max != 0 {
		t.Errorf("WaitTime %+v, want none: the broker throttled nothing", st.WaitTime)
	}
}
