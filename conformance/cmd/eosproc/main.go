// Command eosproc is one instance of the conformance suite's exactly-once
// job (TestSDKProcessorKilled, TestClusterProcessorCoordinatorKilled): an
// sdk.Processor running eostest.Job from
// -in to -out in group -group with transactional ID -id, until SIGTERM or
// SIGINT (or a SIGKILL, which the test sends).
//
//	eosproc -brokers 127.0.0.1:9092 -group g -in in -out out -id g-0 [-protocol consumer] [-static]
//
// Exit status: 0 when stopped by a signal, 1 when Run failed (after
// ErrTxnFenced: a zombie), 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/eostest"
	"github.com/azkafka/azkafka/sdk"
)

func main() {
	brokers := flag.String("brokers", "", "bootstrap addresses, comma-separated")
	group := flag.String("group", "", "consumer group")
	in := flag.String("in", "", "input topic")
	out := flag.String("out", "", "output topic")
	id := flag.String("id", "", "transactional ID")
	protocol := flag.String("protocol", "classic", "group protocol: classic or consumer")
	engine := flag.String("engine", "sdk", "sdk, or kgo: franz-go's GroupTransactSession driven directly, the control")
	static := flag.Bool("static", false, "join as a static member (KIP-345), with -id as the group instance ID")
	flag.Parse()
	if *brokers == "" || *group == "" || *in == "" || *out == "" || *id == "" {
		fmt.Fprintln(os.Stderr, "eosproc: -brokers, -group, -in, -out and -id are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *engine == "kgo" {
		if err := runKgo(ctx, strings.Split(*brokers, ","), *group, *in, *out, *id, *protocol, *static); err != nil {
			fmt.Fprintln(os.Stderr, "eosproc:", err)
			os.Exit(1)
		}
		return
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: eosLevel()})).With("id", *id)
	opts := []sdk.Option{sdk.WithAZ("az-a"), sdk.WithLogger(logger), sdk.WithTransactionalID(*id),
		sdk.WithTransactionTimeout(5 * time.Second), sdk.WithGroupProtocol(sdk.GroupProtocol(*protocol))}
	if *static {
		opts = append(opts, sdk.WithGroupInstanceID(*id))
	}
	for {
		p, err := sdk.NewProcessor(kafka.ReaderConfig{Brokers: strings.Split(*brokers, ","), GroupID: *group, Topic: *in,
			MaxWait: 100 * time.Millisecond, HeartbeatInterval: 300 * time.Millisecond, SessionTimeout: 6 * time.Second,
			RebalanceTimeout: 6 * time.Second},
			&kafka.Writer{Topic: *out, Balancer: &kafka.Hash{}}, opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "eosproc:", err)
			os.Exit(1)
		}
		err = p.Run(ctx, eostest.Job)
		p.Close()
		if errors.Is(err, sdk.ErrTxnUnknown) {
			// A commit got no answer: the Processor stopped; a new one
			// reads on from what the cluster committed.
			logger.Warn("eosproc: starting a new Processor after a commit without an answer", "error", err)
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "eosproc:", err)
			os.Exit(1)
		}
		return
	}
}

// eosLevel is the log level: EOSPROC_LOG=debug for the engine's own lines.
func eosLevel() slog.Level {
	if os.Getenv("EOSPROC_LOG") == "debug" {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// runKgo is the same job on franz-go's GroupTransactSession alone.
func runKgo(ctx context.Context, brokers []string, group, in, out, id, protocol string, static bool) error {
	opts := []kgo.Opt{kgo.TransactionTimeout(5 * time.Second), kgo.SessionTimeout(6 * time.Second),
		kgo.RebalanceTimeout(6 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond)}
	if protocol == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	if static {
		opts = append(opts, kgo.InstanceID(id))
	}
	job := eostest.KgoJob{Brokers: brokers, Group: group, In: in, Out: out, ID: id, Opts: opts,
		ProduceFailed: func(err error) { fmt.Fprintln(os.Stderr, "eosproc: produce:", err) }}
	return job.Run(ctx)
}
