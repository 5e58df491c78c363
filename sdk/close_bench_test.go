package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// BenchmarkClose measures Close on a healthy embedded broker, in one run
// for kafka-go's clients and the SDK's: a Writer after one synchronous
// write (nothing left to send), an async Writer right after a call (its
// message still lingers), a partition Reader and a group Reader after one
// read. Only Close is timed; each iteration sets a client up first (a
// group Reader joins its group), so give it a count of iterations.
// Compare with benchstat:
//
//	go test -run '^$' -bench BenchmarkClose -benchtime 20x -count 6 ./sdk > close.txt
//	benchstat -col /client close.txt
func BenchmarkClose(b *testing.B) {
	c := embedded.StartT(b, embedded.Topic("close", 1))
	type closer interface{ Close() error }
	for _, tc := range []struct {
		name string
		open func(b *testing.B, sdkClient bool) closer
	}{
		{"writer-sync", func(b *testing.B, s bool) closer { return benchWriter(b, c, false, s) }},
		{"writer-async-lingering", func(b *testing.B, s bool) closer { return benchWriter(b, c, true, s) }},
		{"reader-partition", func(b *testing.B, s bool) closer { return benchReader(b, c, "", s) }},
		{"reader-group", func(b *testing.B, s bool) closer { return benchReader(b, c, "close-bench", s) }},
	} {
		for _, client := range []string{"kafka-go", "sdk"} {
			b.Run(tc.name+"/client="+client, func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					cl := tc.open(b, client == "sdk")
					b.StartTimer()
					if err := cl.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchWriter returns a Writer (kafka-go's, or the SDK's) after one call:
// synchronous, or async with BatchTimeout's default, so that its message
// still lingers.
func benchWriter(b *testing.B, c *embedded.Cluster, async, sdkClient bool) interface{ Close() error } {
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "close", RequiredAcks: kafka.RequireAll, Async: async}
	if !async {
		w.BatchTimeout = time.Millisecond
	}
	var cl interface {
		Close() error
		WriteMessages(context.Context, ...kafka.Message) error
	} = w
	if sdkClient {
		sw, err := sdk.NewWriter(w, testOptions(b)...)
		if err != nil {
			b.Fatal(err)
		}
		cl = sw
	}
	if err := cl.WriteMessages(context.Background(), kafka.Message{Value: []byte("v")}); err != nil {
		b.Fatal(err)
	}
	return cl
}

type fetcher interface {
	FetchMessage(context.Context) (kafka.Message, error)
	Close() error
}

func benchReader(b *testing.B, c *embedded.Cluster, group string, sdkClient bool) interface{ Close() error } {
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "close", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	if err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte("r")}); err != nil {
		b.Fatal(err)
	}
	w.Close()
	cfg := kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "close", GroupID: group, MaxWait: 500 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond}
	var r fetcher
	if sdkClient {
		sr, err := sdk.NewReader(cfg, testOptions(b)...)
		if err != nil {
			b.Fatal(err)
		}
		r = sr
	} else {
		r = kafka.NewReader(cfg)
	}
	if _, err := r.FetchMessage(context.Background()); err != nil {
		b.Fatal(err)
	}
	return r
}
