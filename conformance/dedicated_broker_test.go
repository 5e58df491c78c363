//go:build conformance

package conformance

// A dedicated single-node KRaft broker for one test, which the test may
// kill -9 and restart on the same log dir and ports; the shared broker
// that run.sh starts is never touched. Same jars and config template as
// run.sh: the classpath file run.sh exports as
// AZKAFKA_CONFORMANCE_BROKER_CLASSPATH, and kafka/server.properties.in.
// The process itself is a kafkanode.Node, which `brokerctl cluster` runs
// too.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/conformance/internal/kafkanode"
)

// dedicatedBroker is one Apache Kafka broker+controller process owned by a
// test: a kafkanode.Node whose failures fail the test.
type dedicatedBroker struct {
	*kafkanode.Node
	t testing.TB
}

// startDedicatedBroker formats a fresh KRaft log dir and starts a broker on
// two free loopback ports, with extra appended to the config template; it
// returns once the broker answers Metadata. The broker is killed when the
// test ends; if the test failed, the end of its log is printed first.
func startDedicatedBroker(t testing.TB, extra ...string) *dedicatedBroker {
	t.Helper()
	return startDedicatedBrokerWith(t, dedicatedConfig{extra: extra})
}

// dedicatedConfig is what a test adds to the dedicated broker's template.
type dedicatedConfig struct {
	// extra lines appended to server.properties (a later key overrides the
	// template's).
	extra []string
	// ports names further free ports: @NAME@ in extra and formatArgs is
	// replaced by the port's number.
	ports []string
	// formatArgs are added to kafka.tools.StorageTool format, e.g.
	// --add-scram SCRAM-SHA-512=[name=u,password=p].
	formatArgs []string
}

// startDedicatedBrokerWith is startDedicatedBroker with further ports and
// format arguments.
func startDedicatedBrokerWith(t testing.TB, dc dedicatedConfig) *dedicatedBroker {
	t.Helper()
	b := newDedicatedNode(t, kafkanode.Node{Name: "dedicated broker", Dir: t.TempDir(), Extra: dc.extra, FormatArgs: dc.formatArgs})
	// A port picked free can be taken before the broker binds it; then try
	// new ones.
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 2+len(dc.ports))
		b.BrokerPort, b.ControllerPort = ports[0], ports[1]
		for i, name := range dc.ports {
			b.Named[name] = ports[2+i]
		}
		b.format()
		err := b.start()
		if err == nil {
			return b
		}
		if attempt < 3 && b.LogContains("Address already in use") {
			t.Logf("dedicated broker: a port was taken before the broker bound it; retrying with new ports")
			continue
		}
		t.Fatalf("dedicated broker: %v", err)
	}
}

// brokerSetup is what a test's own brokers start from: the Kafka 4.3.1
// classpath run.sh resolved, the java binary and conformance/kafka.
func brokerSetup(t testing.TB) kafkanode.Setup {
	t.Helper()
	cpFile := os.Getenv("AZKAFKA_CONFORMANCE_BROKER_CLASSPATH")
	if cpFile == "" {
		missing(t, "AZKAFKA_CONFORMANCE_BROKER_CLASSPATH is not set: run `make conformance`, which resolves the Kafka 4.3.1 jars (not done when AZKAFKA_CONFORMANCE_BROKERS names your own broker)")
	}
	cp, err := kafkanode.ReadClasspath(cpFile)
	if err != nil {
		missing(t, fmt.Sprintf("AZKAFKA_CONFORMANCE_BROKER_CLASSPATH=%q: %v: run `make conformance`", cpFile, err))
	}
	return kafkanode.Setup{Java: javaBinary(t), Classpath: cp, ConfDir: mustAbs(t, "kafka")}
}

// newDedicatedNode is node, a Kafka process of the test's own, not
// formatted nor started yet, with the setup of brokerSetup. It is killed
// when the test ends; if the test failed, the end of its log is printed
// first.
func newDedicatedNode(t testing.TB, node kafkanode.Node) *dedicatedBroker {
	t.Helper()
	node.Setup = brokerSetup(t)
	if node.Named == nil {
		node.Named = map[string]int{}
	}
	b := &dedicatedBroker{Node: &node, t: t}
	b.cleanup()
	return b
}

// cleanup kills the node when the test ends, printing the end of its log
// first if the test failed.
func (b *dedicatedBroker) cleanup() {
	b.t.Cleanup(func() {
		if b.t.Failed() {
			b.printLogTail(60)
		}
		b.kill()
	})
}

// Port is the number of the named port of dedicatedConfig.ports.
func (b *dedicatedBroker) Port(name string) int {
	p, ok := b.Named[name]
	if !ok {
		b.t.Fatalf("%s: no port named %q", b.Name, name)
	}
	return p
}

// format writes server.properties and formats a fresh data dir, as run.sh
// does for the shared broker.
func (b *dedicatedBroker) format() {
	b.t.Helper()
	if err := b.Format(); err != nil {
		b.t.Fatal(err)
	}
}

// start runs kafka.Kafka on the current config and data dir and waits until
// it answers Metadata; it returns an error if the JVM exits first or the
// budget ends.
func (b *dedicatedBroker) start() error { return b.Start() }

// Kill9 sends SIGKILL to the broker and waits until the process is gone:
// no shutdown hook runs, nothing is flushed.
func (b *dedicatedBroker) Kill9() {
	b.t.Helper()
	if !b.Running() {
		b.t.Fatalf("%s: Kill9 without a running broker", b.Name)
	}
	if err := b.Kill(); err != nil {
		b.t.Fatal(err)
	}
	// The suite's helpers (createTopic, deliverytest) use kafka-go's
	// DefaultTransport, whose pool still holds connections to the killed
	// process: drop them, or the next request on one reads EOF.
	closeDefaultTransport()
}

// Restart starts the broker again on the same log dir and ports and waits
// until it answers Metadata.
func (b *dedicatedBroker) Restart() {
	b.t.Helper()
	if b.Running() {
		b.t.Fatalf("%s: Restart while it runs; Kill9 or Terminate first", b.Name)
	}
	if err := b.Start(); err != nil {
		b.t.Fatalf("%s restart on %s: %v", b.Name, b.Dir, err)
	}
}

// Terminate sends SIGTERM, Kafka's controlled shutdown (the broker hands
// its leaderships over before it stops), and waits until the process is
// gone, at most budget; past it the broker is killed and the test fails.
func (b *dedicatedBroker) Terminate(budget time.Duration) {
	b.t.Helper()
	if !b.Running() {
		b.t.Fatalf("%s: Terminate without a running broker", b.Name)
	}
	if err := b.Node.Terminate(budget); err != nil {
		b.t.Fatal(err)
	}
	closeDefaultTransport()
}

func closeDefaultTransport() {
	if tr, ok := kafka.DefaultTransport.(*kafka.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// kill stops the broker, if it runs, at the end of the test.
func (b *dedicatedBroker) kill() {
	if err := b.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		b.t.Log(err)
	}
}

// printLogTail logs the last n lines of the broker's log and console.
func (b *dedicatedBroker) printLogTail(n int) {
	for _, s := range b.LogTails(n) {
		b.t.Log(s)
	}
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := kafkanode.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

func mustAbs(t testing.TB, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
