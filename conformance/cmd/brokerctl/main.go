// Command brokerctl is the Go side of conformance/run.sh: it picks free
// loopback ports for the real broker, makes a KRaft cluster ID, and waits
// until a broker answers a Metadata request.
//
//	brokerctl ports 2                       # two free ports on 127.0.0.1, one per line
//	brokerctl cluster-id                    # a random cluster ID for kafka-storage format
//	brokerctl wait -timeout 60s 127.0.0.1:9092
//
// Exit status: 0 on success, 1 on failure, 2 on bad usage.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/azkafka/azkafka/internal/embedded"
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
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
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
		ports, err := freePorts(n)
		if err != nil {
			fmt.Fprintf(stderr, "brokerctl ports: %v\n", err)
			return exitFail
		}
		for _, p := range ports {
			fmt.Fprintln(stdout, p)
		}
		return exitOK
	case "cluster-id":
		id, err := clusterID(rand.Reader)
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
	default:
		fmt.Fprintf(stderr, "brokerctl: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1. All n
// listeners stay open until every port is chosen, so the ports differ; another
// process may still take one before the broker binds it.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listen on 127.0.0.1:0: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// clusterID returns a KRaft cluster ID in the form Kafka's Uuid.toString
// produces: 16 random bytes, URL-safe base64 without padding (22 characters).
// Like Kafka, it never starts with '-', which a command-line parser would take
// for a flag.
func clusterID(random io.Reader) (string, error) {
	var b [16]byte
	for range 100 {
		if _, err := io.ReadFull(random, b[:]); err != nil {
			return "", fmt.Errorf("read random bytes: %w", err)
		}
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id, nil
		}
	}
	return "", errors.New("random source keeps producing IDs that start with '-'")
}
