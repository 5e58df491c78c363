// Quickstart shows azkafka's promise in a few seconds: a producer and a
// consumer-group reader in az-b start on a simulated cluster whose only
// agent is in az-a; when an az-b agent appears, interzone load balancing
// moves them to it, cross-AZ traffic stops, and no message is lost.
//
//	go run ./examples/quickstart
//
// Everything runs in process on loopback: an embedded Kafka-protocol broker
// behind simulated WarpStream-style agents (internal/testkit/azsim). With
// KAFKA_BROKERS=host:port[,host:port] it produces and consumes through
// sdk.NewWriter and sdk.NewReader against that cluster instead, and reports
// what a client can see there.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/azsim"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
	"github.com/segmentio/kafka-go"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, os.Getenv); err != nil {
		log.Fatalf("quickstart: %v", err)
	}
}

const (
	topic    = "quickstart"
	clientAZ = "az-b"
)

func run(ctx context.Context, out io.Writer, getenv func(string) string) error {
	if b := getenv("KAFKA_BROKERS"); b != "" {
		return runReal(ctx, out, getenv, strings.Split(b, ","))
	}
	return runSimulated(ctx, out)
}

// runSimulated plays story a on an embedded broker behind simulated agents.
func runSimulated(ctx context.Context, out io.Writer) error {
	cluster, err := embedded.Start(embedded.Topic(topic, 3))
	if err != nil {
		return err
	}
	defer cluster.Close()

	// The simulated clients live in az-b: say so instead of detecting the
	// machine's zone, which would be the wrong answer here.
	opts := []sdk.Option{
		sdk.WithAZ(clientAZ),
		sdk.WithGetenv(func(string) string { return "" }),
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
	}
	var writer *sdk.Writer
	story := azsim.Story{
		Backend:  cluster.Addrs()[0],
		Topic:    topic,
		LocalAZ:  clientAZ,
		RemoteAZ: "az-a",
		Interval: 200 * time.Millisecond,
		Before:   1100 * time.Millisecond, // not a multiple of Interval: the agent appears between two balancing passes
		After:    2 * time.Second,
		NewProducer: func(bootstrap []string) (azsim.Producer, error) {
			w, err := sdk.NewWriter(&kafka.Writer{
				Addr: kafka.TCP(bootstrap...), Topic: topic, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll,
			}, opts...)
			writer = w
			return w, err
		},
		NewConsumer: func(bootstrap []string) (azsim.Consumer, error) {
			return sdk.NewReader(kafka.ReaderConfig{
				Brokers: bootstrap, Topic: topic, GroupID: "quickstart",
				StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond,
				HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second,
				RebalanceTimeout: time.Second, JoinGroupBackoff: 100 * time.Millisecond,
			}, opts...)
		},
	}
	fmt.Fprintf(out, "azkafka quickstart: embedded broker %s behind simulated agents; clients in %s, first agent in az-a\n",
		cluster.Addrs()[0], clientAZ)
	rep, err := story.Run(ctx)
	if err != nil {
		return err
	}
	st := writer.Stats().SDK
	fmt.Fprintf(out, "AZ assumed:      %s (source: %s; the quickstart sets it with sdk.WithAZ because its clients are simulated in %s)\n",
		st.AZ, st.AZSource, clientAZ)
	fmt.Fprintf(out, "client ID:       %s\n", st.ClientID)
	fmt.Fprintf(out, "cross-AZ bytes:  before the az-b agent (%v): produce %d, fetch %d\n",
		rep.BeforeTook.Round(100*time.Millisecond), rep.CrossBefore.ProduceBytes, rep.CrossBefore.FetchBytes)
	fmt.Fprintf(out, "                 after it appeared (%v): produce %d, fetch %d; in the last %v: produce %d, fetch %d\n",
		rep.AfterTook.Round(100*time.Millisecond), rep.CrossAfter.ProduceBytes, rep.CrossAfter.FetchBytes, story.After-story.After/2,
		rep.CrossSettled.ProduceBytes, rep.CrossSettled.FetchBytes)
	verdict := "converged"
	if !rep.Converged {
		verdict = "NOT converged"
	}
	fmt.Fprintf(out, "switch:          %s to az-b in %v (load-balancing interval %v, %d connections closed by it)\n",
		verdict, rep.Convergence.Round(time.Millisecond), story.Interval, rep.LBCloses)
	fmt.Fprintf(out, "produce latency: p99 %v steady, %v during the switch\n",
		rep.SteadyP99.Round(100*time.Microsecond), rep.SwitchP99.Round(100*time.Microsecond))
	fmt.Fprintf(out, "messages:        produced %d, consumed %d, lost %d, duplicated %d, failed writes %d (re-delivered to the group after a rebalance: %d)\n",
		rep.Acked+rep.Failed, rep.Consumed, rep.Lost, rep.Duplicates, rep.Failed, rep.Redelivered)
	fmt.Fprintf(out, "writer:          idempotent %v (producer ID %d): %d produce requests resent (stored once either way)\n",
		st.Idempotent, st.ProducerID, st.Retries)
	if rep.Lost != 0 || !rep.Converged {
		return fmt.Errorf("story a failed: lost %d, converged %v", rep.Lost, rep.Converged)
	}
	return nil
}

// runReal produces and consumes n messages on a real cluster.
func runReal(ctx context.Context, out io.Writer, getenv func(string) string, brokers []string) error {
	const n = 100
	opts := []sdk.Option{sdk.WithGetenv(getenv), sdk.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	fmt.Fprintf(out, "azkafka quickstart: KAFKA_BROKERS=%s\n", strings.Join(brokers, ","))
	if err := embedded.CreateTopic(ctx, brokers, topic, 3); err != nil {
		return err
	}
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}, opts...)
	if err != nil {
		return err
	}
	defer w.Close()
	st := w.Stats().SDK
	az := st.AZ
	if az == "" {
		az = "unknown (warpstream_az omitted; set AZKAFKA_AZ)"
	}
	fmt.Fprintf(out, "AZ assumed:      %s (source: %s)\n", az, orNone(st.AZSource))
	fmt.Fprintf(out, "client ID:       %s\n", st.ClientID)

	run := fmt.Sprintf("run-%d", time.Now().UnixNano())
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s/%d", run, i))}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, GroupID: "azkafka-quickstart-" + run,
		StartOffset: kafka.FirstOffset, MaxWait: 250 * time.Millisecond}, opts...)
	if err != nil {
		return err
	}
	defer r.Close()
	seen := map[string]int{}
	readCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for len(seen) < n {
		m, err := r.ReadMessage(readCtx)
		if err != nil {
			break // timeout: report what arrived
		}
		if v := string(m.Value); strings.HasPrefix(v, run+"/") {
			seen[v]++
		}
	}
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	fmt.Fprintf(out, "cross-AZ bytes:  not measurable from a client on a real cluster (the simulator's accounting needs its agents)\n")
	fmt.Fprintf(out, "messages:        produced %d, consumed %d, lost %d, duplicated %d\n", n, len(seen), n-len(seen), dups)
	if len(seen) != n {
		return fmt.Errorf("lost %d of %d messages", n-len(seen), n)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
