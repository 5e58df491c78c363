package sdk_test

import (
	"context"
	"fmt"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
	"github.com/segmentio/kafka-go"
)

func ExampleNewAZAwareDialer() {
	c, err := embedded.Start(embedded.Topic("events", 1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	// The change: wherever a *kafka.Dialer goes, pass this one.
	// WithAZ skips zone detection; in production AZKAFKA_AZ or detection
	// provides it.
	dialer, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 10 * time.Second, ClientID: "billing"},
		sdk.WithAZ("us-east-1a"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dialer.DialLeader(ctx, "tcp", c.Addrs()[0], "events", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	if _, err := conn.WriteMessages(kafka.Message{Value: []byte("hello")}); err != nil {
		fmt.Println(err)
		return
	}
	parts, _ := sdk.ParseClientID(dialer.ClientID)
	fmt.Println("user ID:", parts.UserID)
	fmt.Println("AZ:", parts.AZ)
	fmt.Println("interzone LB:", parts.InterzoneLB)
	stats, _ := sdk.DialerConnStats(dialer)
	fmt.Println("connections created:", stats.ConnectionsCreated > 0)
	// Output:
	// user ID: billing
	// AZ: us-east-1a
	// interzone LB: true
	// connections created: true
}

func ExampleNewTransport() {
	c, err := embedded.Start(embedded.Topic("events", 1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	// For kafka.Writer.Transport and kafka.Client.Transport.
	tr, err := sdk.NewTransport(nil, sdk.WithAZ("us-east-1a"), sdk.WithMaxConnRate(10, 5))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(c.Addrs()...), Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"events"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("topic:", md.Topics[0].Name)
	stats, _ := sdk.TransportConnStats(tr)
	fmt.Println("dial failures:", stats.DialFailures)
	// Output:
	// topic: events
	// dial failures: 0
}

func ExampleClientID() {
	id, err := sdk.ClientID(sdk.ClientIDParts{
		UserID:      "billing,warpstream_az=stale", // the stale pair is replaced
		SessionID:   "0b8e4b1e-5d2a-4c3f-9f1e-2a6b7c8d9e0f",
		AZ:          "us-east-1a",
		InterzoneLB: true,
	})
	fmt.Println(id, err)
	// Output: billing,warpstream_session_id=0b8e4b1e-5d2a-4c3f-9f1e-2a6b7c8d9e0f,warpstream_az=us-east-1a,warpstream_interzone_lb=true <nil>
}

func ExampleParseClientID() {
	p, err := sdk.ParseClientID("billing,warpstream_session_id=0b8e4b1e-5d2a-4c3f-9f1e-2a6b7c8d9e0f,warpstream_az=us-east-1a,warpstream_interzone_lb=true")
	fmt.Printf("%q %q %v %v\n", p.UserID, p.AZ, p.InterzoneLB, err)
	_, err = sdk.ParseClientID("warpstream_session_id=0b8e4b1e-5d2a-4c3f-9f1e-2a6b7c8d9e0f,warpstream_az=a,warpstream_az=b")
	fmt.Println(err)
	// Output:
	// "billing" "us-east-1a" true <nil>
	// sdk: client ID "warpstream_session_id=0b8e4b1e-5d2a-4c3f-9f1e-2a6b7c8d9e0f,warps"...(90 bytes): duplicated key "warpstream_az"
}

func ExampleResolveIdentity() {
	id, err := sdk.ResolveIdentity(context.Background(),
		sdk.WithAZ("eu-west-1b"), sdk.WithSessionID("0b8e4b1e-5d2a-4c3f-9f1e-2a6b7c8d9e0f"), sdk.WithInterzoneLB(false))
	fmt.Println(id.ClientID, id.AZSource, err)
	// Output: warpstream_session_id=0b8e4b1e-5d2a-4c3f-9f1e-2a6b7c8d9e0f,warpstream_az=eu-west-1b option <nil>
}
