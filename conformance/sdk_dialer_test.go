//go:build conformance

package conformance

// The NewAZAwareDialer / NewTransport tests of sdk/dialer_test.go and
// sdk/storm_test.go, against the real broker.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// dialcOptions never detect the zone: an explicit AZ, an empty environment.
func dialcOptions(extra ...sdk.Option) []sdk.Option {
	return append([]sdk.Option{sdk.WithAZ("us-east-1a"), sdk.WithGetenv(func(string) string { return "" })}, extra...)
}

// TestSDKDialerClientIDSeenByKafka: the client ID of a consumer-group
// member, as the real broker reports it in DescribeGroups, is the one the
// Dialer stamped; and Kafka accepts the format for produce and fetch.
func TestSDKDialerClientIDSeenByKafka(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-dialer-%d", time.Now().UnixNano())
	if err := embedded.CreateTopic(ctx, addrs, topic, 1); err != nil {
		t.Fatal(err)
	}
	d, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 10 * time.Second, ClientID: "billing"}, dialcOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := d.DialLeader(ctx, "tcp", addrs[0], topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.WriteMessages(kafka.Message{Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	group := topic + "-g"
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, GroupID: group, Dialer: d, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	if _, err := r.FetchMessage(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := (&kafka.Client{Addr: kafka.TCP(addrs...)}).DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 || len(resp.Groups[0].Members) != 1 {
		t.Fatalf("groups %+v", resp.Groups)
	}
	got := resp.Groups[0].Members[0].ClientID
	if got != d.ClientID || !strings.HasPrefix(got, "billing,warpstream_session_id=") {
		t.Fatalf("Kafka has member client ID %q, the Dialer stamped %q", got, d.ClientID)
	}
	t.Logf("Kafka 4.3.1 reports member client ID %q", got)
}

// TestSDKReconnectStormRealKafka: 50 kafka.Clients with NewTransport reach
// the real broker through one proxy; every connection is closed at once;
// the re-dials respect the process-wide limit and spread over time.
func TestSDKReconnectStormRealKafka(t *testing.T) {
	const (
		clients = 50
		perSec  = 20.0
		burst   = 10
	)
	addrs := brokers(t)
	storm := deliverytest.RunStorm(t, addrs[0], clients, 2*time.Minute, func() *kafka.Transport {
		tr, err := sdk.NewTransport(nil, dialcOptions(sdk.WithMaxConnRate(perSec, burst))...)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	})
	ds := storm.Redials
	if len(ds) < clients {
		t.Fatalf("%d re-dials for %d clients", len(ds), clients)
	}
	busiest := deliverytest.MaxInWindow(ds, time.Second)
	t.Logf("real Kafka, %d clients, limit %v/s burst %d: %d re-dials, busiest second %d, all served after %v\n%s",
		clients, perSec, burst, len(ds), busiest, storm.Elapsed.Round(time.Millisecond), deliverytest.Histogram(ds, 100*time.Millisecond))
	if busiest > int(perSec)+burst+3 { // +3: 100 ms of wake-up and accept skew, as in sdk/storm_test.go
		t.Errorf("%d re-dials within one second, the limit allows %d", busiest, int(perSec)+burst)
	}
	minSpan := time.Duration(float64(len(ds)-burst-1) / perSec * float64(time.Second))
	if span := ds[len(ds)-1] - ds[0]; span < minSpan*9/10 {
		t.Errorf("re-dials span %v, want at least %v", span, minSpan)
	}
}
