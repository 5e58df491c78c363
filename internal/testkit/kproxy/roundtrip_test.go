package kproxy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRoundTripBroker(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("rt", 2))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	av, err := kproxy.RoundTrip(ctx, c.Addrs()[0], "rt-test", kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(av.(*kmsg.ApiVersionsResponse).ApiKeys); n == 0 {
		t.Fatal("ApiVersions response lists no API keys")
	}
	for _, v := range []int16{1, 9, 12} { // classic and flexible headers
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("rt")
		req.Topics = append(req.Topics, topic)
		resp, err := kproxy.RoundTrip(ctx, c.Addrs()[0], "rt-test", req)
		if err != nil {
			t.Fatalf("Metadata v%d: %v", v, err)
		}
		md := resp.(*kmsg.MetadataResponse)
		if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 2 {
			t.Fatalf("Metadata v%d: topics %+v, want rt with 2 partitions", v, md.Topics)
		}
	}
}

func TestRoundTripFailures(t *testing.T) {
	// A server that announces a response larger than any Kafka frame.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			var size [4]byte
			binary.BigEndian.PutUint32(size[:], kproxy.MaxFrameSize+1)
			_, _ = conn.Write(size[:])
			conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := kproxy.RoundTrip(ctx, ln.Addr().String(), "x", kmsg.NewPtrApiVersionsRequest()); !errors.Is(err, kproxy.ErrMalformed) {
		t.Errorf("oversized response: err = %v, want ErrMalformed", err)
	}

	// A server that accepts and never answers: ctx bounds the exchange.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if _, err := kproxy.RoundTrip(short, silent.Addr().String(), "x", kmsg.NewPtrApiVersionsRequest()); err == nil {
		t.Error("silent server: RoundTrip returned no error")
	}
}
