package sdk_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

func ExampleWithRackAwarePartitioning() {
	brokers, stop := exampleBroker("clicks", 3)
	defer stop()

	// Keyless messages go to partitions whose leader's rack (broker.rack)
	// is az-a. The embedded broker has no racks, so here every partition
	// is used, as without the option.
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        "clicks",
		RequiredAcks: kafka.RequireAll,
	}, sdk.WithAZ("az-a"), sdk.WithRackAwarePartitioning(true), sdk.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	if err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte("no key")}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("delivered", w.Stats().Messages)
	// Output: delivered 1
}

func ExampleZoneAffinityGroupBalancer() {
	// Two members in az-a and az-b, four partitions led two per zone:
	// each member gets the two led in its own zone.
	member := func(id, zone string) kafka.GroupMember {
		ud, _ := sdk.ZoneAffinityGroupBalancer{Zone: zone}.UserData()
		return kafka.GroupMember{ID: id, Topics: []string{"events"}, UserData: ud}
	}
	var parts []kafka.Partition
	for p, rack := range []string{"az-a", "az-b", "az-a", "az-b"} {
		parts = append(parts, kafka.Partition{Topic: "events", ID: p, Leader: kafka.Broker{Rack: rack}})
	}
	got := sdk.ZoneAffinityGroupBalancer{}.AssignGroups([]kafka.GroupMember{member("m-a", "az-a"), member("m-b", "az-b")}, parts)
	fmt.Println("m-a:", got["m-a"]["events"], "m-b:", got["m-b"]["events"])

	// In an sdk.Reader: list it first, and range for members not yet
	// upgraded; NewReader gives the empty Zone the Reader's AZ.
	_ = kafka.ReaderConfig{
		Brokers: []string{"broker:9092"}, GroupID: "billing", Topic: "events",
		GroupBalancers: []kafka.GroupBalancer{sdk.ZoneAffinityGroupBalancer{}, kafka.RangeGroupBalancer{}},
	}
	// Output: m-a: [0 2] m-b: [1 3]
}

func ExampleNewZoneAffinityGroupBalancer() {
	// For kafka-go's own Reader: the balancer and the dialer resolve the
	// AZ from the same options (WithAZ here; in production AZKAFKA_AZ or
	// detection).
	opts := []sdk.Option{sdk.WithAZ("us-east-1a"), sdk.WithLogger(slog.New(slog.DiscardHandler))}
	b, err := sdk.NewZoneAffinityGroupBalancer(opts...)
	if err != nil {
		fmt.Println(err)
		return
	}
	dialer, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 10 * time.Second}, opts...)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := kafka.ReaderConfig{
		Brokers: []string{"broker:9092"}, GroupID: "billing", Topic: "events", Dialer: dialer,
		GroupBalancers: []kafka.GroupBalancer{b, kafka.RangeGroupBalancer{}},
	}
	_ = cfg // kafka.NewReader(cfg)
	parts, _ := sdk.ParseClientID(dialer.ClientID)
	fmt.Println("balancer zone:", b.Zone, "client ID zone:", parts.AZ)
	// Output: balancer zone: us-east-1a client ID zone: us-east-1a
}
