package kproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/segmentio/kafka-go"
)

// Drop the response to the first Produce request: the broker stores the
// message, the client sees its connection close.
func ExampleStart() {
	c, err := embedded.Start(embedded.Topic("orders", 1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	first := true
	p.OnRequest(func(r kproxy.Request) kproxy.Action {
		if r.Key == 0 && first { // only the relay goroutine of this one connection calls it
			first = false
			return kproxy.CloseAfter
		}
		return kproxy.Forward
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", p.Addr(), "orders", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.WriteMessages(kafka.Message{Value: []byte("order-1")})
	fmt.Println("client saw EOF:", errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF))
	// Output: client saw EOF: true
}
