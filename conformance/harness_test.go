//go:build conformance

package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/conformance/internal/kafkanode"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

// brokerReadyBudget bounds how long brokers waits for the broker named in
// AZKAFKA_CONFORMANCE_BROKERS to answer a Metadata request.
const brokerReadyBudget = 15 * time.Second

// The suite's two lanes. The cluster tests (each with its own 3-node
// cluster) spend the CPU of three brokers; the broker-lane tests, on the
// shared broker or a dedicated one, mostly wait: on session timeouts,
// restarts, killed processes. After the sequential tests, the two lanes
// run side by side, each one test at a time; run.sh gives go test the
// -parallel that lets every laned test wait for its lane. No test of a
// lane touches what another test uses: the clusters and the dedicated
// brokers are their own, and the tests of the shared broker that run
// beside a cluster test name their own topics and groups.
var clusterLane, brokerLane sync.Mutex

// inLane runs t in lane, beside the other lane (see clusterLane).
func inLane(t *testing.T, lane *sync.Mutex) {
	t.Helper()
	t.Parallel()
	lane.Lock()
	t.Cleanup(lane.Unlock)
}

var brokerCheck struct {
	once sync.Once
	err  error
}

// brokers returns the real broker's bootstrap addresses, which
// conformance/run.sh exports as AZKAFKA_CONFORMANCE_BROKERS. Without it the
// test is skipped, except under CI=true, where a missing broker fails. A
// broker that is named but does not answer a Metadata request within
// brokerReadyBudget fails the test (checked once per test binary).
func brokers(t testing.TB) []string {
	t.Helper()
	v := os.Getenv("AZKAFKA_CONFORMANCE_BROKERS")
	if v == "" {
		missing(t, "AZKAFKA_CONFORMANCE_BROKERS is not set: run `make conformance`, which starts a real Kafka 4.3.1 broker")
	}
	var addrs []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		t.Fatalf("AZKAFKA_CONFORMANCE_BROKERS=%q: no host:port in it", v)
	}
	brokerCheck.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), brokerReadyBudget)
		defer cancel()
		brokerCheck.err = embedded.WaitReady(ctx, addrs)
	})
	if brokerCheck.err != nil {
		t.Fatalf("AZKAFKA_CONFORMANCE_BROKERS=%q: %v", v, brokerCheck.err)
	}
	return addrs
}

// missing reports a missing prerequisite: a failure under CI=true, a skip
// otherwise.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// createTopic creates a topic with replication factor 1 on the broker at addrs
// and waits until every partition has a leader, so that a client started
// right after sees the whole topic. It fails the test on error or when ctx
// ends first.
func createTopic(t testing.TB, ctx context.Context, addrs []string, name string, partitions int) {
	t.Helper()
	if err := embedded.CreateTopic(ctx, addrs, name, partitions); err != nil {
		t.Fatal(err)
	}
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 5 * time.Second}
	var last error
	for {
		last = topicLed(ctx, cl, name, partitions)
		if last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %q: partitions without a leader: %v (%v)", name, last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// topicLed returns nil when the topic has exactly partitions partitions and
// each partition's leader answers ListOffsets. Metadata alone is not enough:
// a broker lists a new leader a moment before it accepts produce requests
// (kafka-go's Writer then sees NOT_LEADER_OR_FOLLOWER).
func topicLed(ctx context.Context, cl *kafka.Client, name string, partitions int) error {
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{name}})
	if err != nil {
		return err
	}
	var topic *kafka.Topic
	for i := range md.Topics {
		if md.Topics[i].Name == name {
			topic = &md.Topics[i]
		}
	}
	switch {
	case topic == nil:
		return errors.New("topic not in metadata yet")
	case topic.Error != nil:
		return topic.Error
	case len(topic.Partitions) != partitions:
		return fmt.Errorf("%d of %d partitions in metadata", len(topic.Partitions), partitions)
	}
	req := make([]kafka.OffsetRequest, 0, partitions)
	for _, p := range topic.Partitions {
		if p.Error != nil {
			return fmt.Errorf("partition %d: %w", p.ID, p.Error)
		}
		if p.Leader.Host == "" {
			return fmt.Errorf("partition %d has no leader", p.ID)
		}
		req = append(req, kafka.LastOffsetOf(p.ID))
	}
	offs, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{name: req}})
	if err != nil {
		return err
	}
	if got := len(offs.Topics[name]); got != partitions {
		return fmt.Errorf("ListOffsets answered for %d of %d partitions", got, partitions)
	}
	for _, po := range offs.Topics[name] {
		if po.Error != nil {
			return fmt.Errorf("partition %d: %w", po.Partition, po.Error)
		}
	}
	return nil
}

// javaProject returns the java classpath of the Maven project
// conformance/java/<name>: its target/classes followed by the runtime
// dependencies that conformance/run.sh wrote to target/classpath.txt. A project
// that was not built is reported with missing.
func javaProject(t testing.TB, name string) (classpath string) {
	t.Helper()
	root := os.Getenv("AZKAFKA_CONFORMANCE_JAVA_DIR")
	if root == "" {
		missing(t, "AZKAFKA_CONFORMANCE_JAVA_DIR is not set: run `make conformance`, which builds conformance/java/*")
	}
	dir := filepath.Join(root, name)
	classes := filepath.Join(dir, "target", "classes")
	if _, err := os.Stat(classes); err != nil {
		missing(t, fmt.Sprintf("Java project %q is not built (%v): run `make conformance`", name, err))
	}
	deps, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
	if err != nil {
		missing(t, fmt.Sprintf("Java project %q has no dependency classpath (%v): run `make conformance`", name, err))
	}
	if d := strings.TrimSpace(string(deps)); d != "" {
		return classes + string(os.PathListSeparator) + d
	}
	return classes
}

// javaBinary returns $JAVA_HOME/bin/java if it exists, else java from PATH.
func javaBinary(t testing.TB) string {
	t.Helper()
	p, err := kafkanode.JavaBinary()
	if err != nil {
		missing(t, err.Error())
	}
	return p
}

// javaCommand returns an unstarted command that runs mainClass of the Maven
// project conformance/java/<name> with args. ctx kills it; so does the end of
// the test if it still runs then. The caller starts it and waits for it, for
// example to keep a long-running fixture in the background.
func javaCommand(t testing.TB, ctx context.Context, name, mainClass string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, javaBinary(t), append([]string{"-cp", javaProject(t, name), mainClass}, args...)...)
	// Output pipes must not keep Wait blocked after the JVM died.
	cmd.WaitDelay = 5 * time.Second
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return cmd
}

// runJava runs mainClass of the Maven project conformance/java/<name> with
// args to completion and returns its standard output. A non-zero exit fails
// the test and shows the end of the program's standard error.
func runJava(t testing.TB, ctx context.Context, name, mainClass string, args ...string) []byte {
	t.Helper()
	cmd := javaCommand(t, ctx, name, mainClass, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java %s %s (project %q) after %v: %v\nstderr (end):\n%s",
			mainClass, strings.Join(args, " "), name, time.Since(start).Round(time.Millisecond), err, tail(stderr.Bytes(), 4096))
	}
	return out
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[len(b)-n:]
}
