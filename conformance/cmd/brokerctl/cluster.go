package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/azkafka/azkafka/conformance/internal/kafkanode"
)

// clusterStopBudget bounds each node's controlled shutdown when the cluster
// stops; past it the node is killed.
const clusterStopBudget = 15 * time.Second

// runCluster starts the conformance suite's 3-node cluster (plaintext),
// prints where it is and how to stop it, and stops it when ctx ends or
// when a node exits on its own (then with status 1).
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	classpath := fs.String("classpath", os.Getenv("AZKAFKA_CONFORMANCE_BROKER_CLASSPATH"),
		"file holding the broker's Java classpath, as run.sh resolves it (default $AZKAFKA_CONFORMANCE_BROKER_CLASSPATH)")
	conf := fs.String("conf", filepath.Join("conformance", "kafka"), "directory of server.properties.in and log4j2.properties")
	dir := fs.String("dir", "", "directory for the nodes' config, data and logs (default: a new temp dir, removed at the end)")
	java := fs.String("java", "", "java binary (default $JAVA_HOME/bin/java, else java from PATH)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 || *classpath == "" {
		fmt.Fprintf(stderr, "brokerctl cluster: want -classpath FILE and no arguments\n%s", usage)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "brokerctl cluster: %v\n", err)
		return exitFail
	}
	setup := kafkanode.Setup{Java: *java}
	var err error
	if setup.Java == "" {
		if setup.Java, err = kafkanode.JavaBinary(); err != nil {
			return fail(err)
		}
	}
	if setup.Classpath, err = kafkanode.ReadClasspath(*classpath); err != nil {
		return fail(fmt.Errorf("-classpath: %w", err))
	}
	if setup.ConfDir, err = filepath.Abs(*conf); err != nil {
		return fail(err)
	}
	if _, err := os.Stat(filepath.Join(setup.ConfDir, "server.properties.in")); err != nil {
		return fail(fmt.Errorf("-conf %s: %w (run from the repository's root, or give -conf)", *conf, err))
	}
	if *dir == "" {
		tmp, err := os.MkdirTemp("", "azkafka-cluster.")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(tmp)
		*dir = tmp
	}

	start := time.Now()
	nodes, err := kafkanode.StartCluster(ctx, setup, *dir, kafkanode.ClusterConfig{
		Logf: func(format string, a ...any) { fmt.Fprintf(stderr, "brokerctl "+format+"\n", a...) },
	})
	if err != nil {
		for _, n := range nodes {
			for _, t := range n.LogTails(20) {
				fmt.Fprintln(stderr, t)
			}
		}
		return fail(err)
	}
	exited := make(chan *kafkanode.Node, len(nodes))
	var addrs []string
	fmt.Fprintf(stdout, "cluster of %d nodes answered after %v (plaintext, racks %s):\n",
		len(nodes), time.Since(start).Round(time.Millisecond), strings.Join(kafkanode.Racks, ", "))
	for i, n := range nodes {
		addrs = append(addrs, n.Addrs()...)
		fmt.Fprintf(stdout, "  node %d  rack %s  %s  pid %d  log %s\n", i+1, kafkanode.Racks[i], n.Addrs()[0], n.Pid(), n.LogFiles()[0])
		go func() { <-n.Exited(); exited <- n }()
	}
	fmt.Fprintf(stdout, "bootstrap: %s\n", strings.Join(addrs, ","))
	fmt.Fprintf(stdout, "stop: Ctrl-C, or kill %d (brokerctl: it stops every node, then exits)\n", os.Getpid())

	status := exitOK
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "stopping the cluster")
	case n := <-exited:
		fmt.Fprintf(stderr, "brokerctl cluster: %s (pid %d) exited on its own; stopping the others\n", n.Name, n.Pid())
		for _, t := range n.LogTails(20) {
			fmt.Fprintln(stderr, t)
		}
		status = exitFail
	}
	if err := kafkanode.StopAll(nodes, clusterStopBudget); err != nil {
		fmt.Fprintf(stderr, "brokerctl cluster: %v\n", err)
		status = exitFail
	}
	fmt.Fprintln(stdout, "cluster stopped")
	return status
}
