// Metrics serves the Prometheus metrics of an azkafka Writer and Reader
// working on an embedded broker, until interrupted:
//
//	cd examples/metrics && go run .
//
// It writes and reads a first round of messages, prints the URL of
// /metrics, then goes on writing and reading a few messages a second.
// Point Prometheus at the URL and import contrib/prometheus/dashboard.json
// into Grafana to see the dashboard move. -addr sets the listen address
// (default localhost:2112, else a free port). The example is a module of
// its own, like contrib/prometheus, so that azkafka's core module needs no
// Prometheus dependency.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"

	azprom "github.com/azkafka/azkafka/contrib/prometheus"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

const defaultAddr = "localhost:2112"

func main() {
	addr := flag.String("addr", defaultAddr, "listen address of /metrics")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *addr, time.Second); err != nil {
		log.Fatalf("metrics: %v", err)
	}
}

const (
	topic = "events"
	round = 100 // messages written and read before the URL is printed
)

// run serves /metrics on addr for a Writer and a Reader on an embedded
// broker, writing and reading a message every tick, until ctx ends.
func run(ctx context.Context, out io.Writer, addr string, tick time.Duration) error {
	cluster, err := embedded.Start(embedded.Brokers(3), embedded.Topic(topic, 6))
	if err != nil {
		return err
	}
	defer cluster.Close()

	// One Collector for the process, handed to every client.
	collector := azprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector, collectors.NewGoCollector())
	ln, err := net.Listen("tcp", addr)
	if err != nil && addr == defaultAddr {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	// kfake gives every broker the rack "krack": this client's AZ is
	// another, so the dashboard's cross-zone share reads 100%.
	opts := func(id string) []sdk.Option {
		return []sdk.Option{
			sdk.WithAZ("az-a"),
			sdk.WithClientID(id),
			sdk.WithMetrics(collector),
			sdk.WithLogger(slog.New(slog.DiscardHandler)),
		}
	}
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(cluster.Addrs()...), Topic: topic, RequiredAcks: kafka.RequireAll}, opts("metrics-example")...)
	if err != nil {
		return err
	}
	defer w.Close()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: cluster.Addrs(), GroupID: "metrics-example", Topic: topic, MaxWait: 500 * time.Millisecond},
		opts("metrics-example")...)
	if err != nil {
		return err
	}
	defer r.Close()

	msgs := make([]kafka.Message, round)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte("hello")}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return err
	}
	for range round {
		if _, err := r.ReadMessage(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "metrics of a Writer and a Reader on an embedded broker: http://%s/metrics (Ctrl-C stops)\n", ln.Addr())

	t := time.NewTicker(tick)
	defer t.Stop()
	for n := round; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := w.WriteMessages(ctx, kafka.Message{Key: fmt.Appendf(nil, "key-%d", n), Value: []byte("hello")}); err != nil {
			return stopped(ctx, err)
		}
		if _, err := r.ReadMessage(ctx); err != nil {
			return stopped(ctx, err)
		}
	}
}

// stopped is nil when err came from ctx ending (Ctrl-C), else err.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
