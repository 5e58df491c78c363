// Command brokerctl is the Go side of conformance/run.sh: it picks free
// loopback ports for the real broker, makes a KRaft cluster ID, waits
// until a broker answers a Metadata request, and runs the 3-node rack
// cluster of the conformance tests (make cluster).
//
//	brokerctl ports 2                       # two free ports on 127.0.0.1, one per line
//	brokerctl cluster-id                    # a random cluster ID for kafka-storage format
//	brokerctl wait -timeout 60s 127.0.0.1:9092
//	brokerctl cluster -classpath FILE       # the cluster, until SIGINT or SIGTERM
//
// Exit status: 0 on success, 1 on failure, 2 on bad usage.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/azkafka/azkafka/conformance/internal/kafkanode"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage:
  brokerctl ports N                     print N free TCP ports on 127.0.0.1
  brokerctl cluster-id                  print a random KRaft cluster ID
  brokerctl wait [-timeout D] ADDRS     wait until a broker at ADDRS (host:port[,host:port]) answers Metadata
  brokerctl cluster -classpath FILE [-conf DIR] [-dir DIR] [-java PATH]
                                        run the conformance suite's 3-node cluster (racks az-a, az-b,
                                        az-c; plaintext) on loopback until SIGINT or SIGTERM
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runContext(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext runs the command in args; cluster runs until ctx ends.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "ports":
		if len(args) != 2 {
			fmt.Fprint(stderr, usage)
			return exitUsage
		}
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 || n > 100 {
			fmt.Fprintf(stderr, "brokerctl ports: N=%q: want a number from 1 to 100\n", args[1])
			return exitUsage
		}
		ports, err := kafkanode.FreePorts(n)
		if err != nil {
			fmt.Fprintf(stderr, "brokerctl ports: %v\n", err)
			return exitFail
		}
		for _, p := range ports {
			fmt.Fprintln(stdout, p)
		}
		return exitOK
	case "cluster-id":
		id, err := kafkanode.NewClusterID(rand.Reader)
		if err != nil {
			fmt.Fprintf(stderr, "brokerctl cluster-id: %v\n", err)
			return exitFail
		}
		fmt.Fprintln(stdout, id)
		return exitOK
	case "wait":
		fs := flag.NewFlagSet("wait", flag.ContinueOnError)
		fs.SetOutput(stderr)
		timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
		if err := fs.Parse(args[1:]); err != nil {
			return exitUsage
		}
		if fs.NArg() != 1 || *timeout <= 0 {
			fmt.Fprint(stderr, usage)
			return exitUsage
		}
		addrs := strings.Split(fs.Arg(0), ",")
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		start := time.Now()
		if err := embedded.WaitReady(ctx, addrs); err != nil {
			fmt.Fprintf(stderr, "brokerctl wait: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(stdout, "broker %s answered Metadata after %v\n", fs.Arg(0), time.Since(start).Round(time.Millisecond))
		return exitOK
	case "cluster":
		return runCluster(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "brokerctl: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
}
