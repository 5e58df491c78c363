// Package runtimepanic holds Writers that kafka-go accepts until their
// first write, where sdk.MustNewWriter would panic when it builds them.
package runtimepanic

import (
	"context"
	"net"

	"github.com/segmentio/kafka-go"
)

// Lazy is configured at init and given its address later.
var Lazy = &kafka.Writer{Topic: "lazy"}

// roundTripper is a kafka.RoundTripper of the application's own.
type roundTripper struct{}

func (roundTripper) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	return kafka.DefaultTransport.RoundTrip(ctx, addr, req)
}

// Traced writes through the application's RoundTripper.
func Traced(brokers []string) *kafka.Writer {
	return &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "traced", Transport: roundTripper{}}
}
