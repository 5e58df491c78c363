package azsim_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/azsim"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/segmentio/kafka-go"
)

// A client in az-b is told only about the az-b agent.
func ExampleStart() {
	c, err := embedded.Start(embedded.Topic("events", 2))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sim, err := azsim.Start(c.Addrs()[0], azsim.Interval(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	for _, az := range []string{"az-a", "az-b"} {
		if _, err := sim.AddAgent(az); err != nil {
			log.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := &kafka.Dialer{ClientID: "app,warpstream_az=az-b,warpstream_interzone_lb=true"}
	conn, err := d.DialContext(ctx, "tcp", sim.Addrs()[0]) // the az-a agent
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	brokers, err := conn.Brokers()
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range brokers {
		fmt.Println("broker", b.ID, "in", b.Rack)
	}
	// Output: broker 2 in az-b
}

// Story a with plain kafka-go clients stamped by hand.
func ExampleStory() {
	c, err := embedded.Start(embedded.Topic("events", 3))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	id := "warpstream_az=az-b,warpstream_interzone_lb=true"
	rep, err := azsim.Story{
		Backend: c.Addrs()[0],
		Topic:   "events",
		NewProducer: func(bootstrap []string) (azsim.Producer, error) {
			return &kafka.Writer{Addr: kafka.TCP(bootstrap...), Topic: "events", BatchTimeout: time.Millisecond,
				RequiredAcks: kafka.RequireAll, Transport: &kafka.Transport{ClientID: id, MetadataTTL: 300 * time.Millisecond}}, nil
		},
		NewConsumer: func(bootstrap []string) (azsim.Consumer, error) {
			return kafka.NewReader(kafka.ReaderConfig{Brokers: bootstrap, Topic: "events", GroupID: "example",
				Dialer: &kafka.Dialer{ClientID: id}, StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond,
				HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second}), nil
		},
	}.Run(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cross-AZ produce bytes before:", rep.CrossBefore.ProduceBytes > 0)
	fmt.Println("cross-AZ produce and fetch bytes once settled:", rep.CrossSettled.ProduceBytes+rep.CrossSettled.FetchBytes)
	// Output:
	// cross-AZ produce bytes before: true
	// cross-AZ produce and fetch bytes once settled: 0
}
