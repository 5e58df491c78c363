//go:build conformance

package conformance

// A dedicated single-node KRaft broker for one test, which the test may
// kill -9 and restart on the same log dir and ports; the shared broker
// that run.sh starts is never touched. Same jars and config template as
// run.sh: the classpath file run.sh exports as
// AZKAFKA_CONFORMANCE_BROKER_CLASSPATH, and kafka/server.properties.in.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// dedicatedReadyBudget bounds one start of a dedicated broker, JVM start
// and log recovery included (a shared 2-core machine is slow to start a
// JVM).
const dedicatedReadyBudget = 2 * time.Minute

// dedicatedBroker is one Apache Kafka broker+controller process owned by a
// test.
type dedicatedBroker struct {
	t          *testing.T
	java       string
	classpath  string
	dir        string // config, data, logs
	brokerPort int
	ctrlPort   int
	extra      []string // server.properties lines appended to the template
	// named ports: @NAME@ in extra and formatArgs is a free port of its own
	// (a further listener's), looked up with Port.
	named      map[string]int
	formatArgs []string // added to StorageTool format (e.g. --add-scram)
	// clusterID is the KRaft cluster ID the log dir is formatted with; a
	// random one when empty. The nodes of a cluster share it.
	clusterID string
	// formatMode is how StorageTool format learns the controller quorum:
	// nil means --standalone (a single node); a cluster's nodes list the
	// voters in their config (controller.quorum.voters) and pass nothing.
	formatMode []string
	name       string // in logs: "dedicated broker", "node 2"
	cmd        *exec.Cmd
	exited     chan struct{} // closed when cmd has been waited for
	starts     int
}

// startDedicatedBroker formats a fresh KRaft log dir and starts a broker on
// two free loopback ports, with extra appended to the config template; it
// returns once the broker answers Metadata. The broker is killed when the
// test ends; if the test failed, the end of its log is printed first.
func startDedicatedBroker(t *testing.T, extra ...string) *dedicatedBroker {
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
func startDedicatedBrokerWith(t *testing.T, dc dedicatedConfig) *dedicatedBroker {
	t.Helper()
	extra := dc.extra
	b := newDedicatedNode(t, "dedicated broker")
	b.extra, b.formatArgs = extra, dc.formatArgs
	// A port picked free can be taken before the broker binds it; then try
	// new ones.
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 2+len(dc.ports))
		b.brokerPort, b.ctrlPort = ports[0], ports[1]
		for i, name := range dc.ports {
			b.named[name] = ports[2+i]
		}
		b.format()
		err := b.start()
		if err == nil {
			return b
		}
		if attempt < 3 && b.logContains("Address already in use") {
			t.Logf("dedicated broker: a port was taken before the broker bound it; retrying with new ports")
			continue
		}
		t.Fatalf("dedicated broker: %v", err)
	}
}

// newDedicatedNode is a Kafka process of the test's own, not formatted nor
// started yet, with the Kafka 4.3.1 classpath run.sh resolved. It is
// killed when the test ends; if the test failed, the end of its log is
// printed first.
func newDedicatedNode(t *testing.T, name string) *dedicatedBroker {
	t.Helper()
	cpFile := os.Getenv("AZKAFKA_CONFORMANCE_BROKER_CLASSPATH")
	if cpFile == "" {
		missing(t, "AZKAFKA_CONFORMANCE_BROKER_CLASSPATH is not set: run `make conformance`, which resolves the Kafka 4.3.1 jars (not done when AZKAFKA_CONFORMANCE_BROKERS names your own broker)")
	}
	cp, err := os.ReadFile(cpFile)
	if err != nil || strings.TrimSpace(string(cp)) == "" {
		missing(t, fmt.Sprintf("AZKAFKA_CONFORMANCE_BROKER_CLASSPATH=%q: no classpath in it (%v): run `make conformance`", cpFile, err))
	}
	b := &dedicatedBroker{t: t, java: javaBinary(t), classpath: strings.TrimSpace(string(cp)), dir: t.TempDir(),
		named: map[string]int{}, name: name}
	t.Cleanup(func() {
		if t.Failed() {
			b.printLogTail(60)
		}
		b.kill()
	})
	return b
}

// Addrs is the broker's bootstrap address.
func (b *dedicatedBroker) Addrs() []string {
	return []string{"127.0.0.1:" + strconv.Itoa(b.brokerPort)}
}

// Port is the number of the named port of dedicatedConfig.ports.
func (b *dedicatedBroker) Port(name string) int {
	p, ok := b.named[name]
	if !ok {
		b.t.Fatalf("dedicated broker: no port named %q", name)
	}
	return p
}

// expand replaces @NAME@ of every named port, @BROKER_PORT@ and
// @CONTROLLER_PORT@.
func (b *dedicatedBroker) expand(s string) string {
	s = strings.NewReplacer("@BROKER_PORT@", strconv.Itoa(b.brokerPort), "@CONTROLLER_PORT@", strconv.Itoa(b.ctrlPort)).Replace(s)
	for name, port := range b.named {
		s = strings.ReplaceAll(s, "@"+name+"@", strconv.Itoa(port))
	}
	return s
}

// format writes server.properties and formats a fresh data dir, as run.sh
// does for the shared broker.
func (b *dedicatedBroker) format() {
	t := b.t
	t.Helper()
	tmpl, err := os.ReadFile(filepath.Join("kafka", "server.properties.in"))
	if err != nil {
		t.Fatalf("config template: %v", err)
	}
	data := filepath.Join(b.dir, "data")
	for _, d := range []string{data, filepath.Join(b.dir, "logs")} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	conf := strings.NewReplacer("@BROKER_PORT@", strconv.Itoa(b.brokerPort),
		"@CONTROLLER_PORT@", strconv.Itoa(b.ctrlPort), "@DATA_DIR@", data).Replace(string(tmpl))
	if len(b.extra) > 0 {
		conf += "\n# Added by the test that owns this broker.\n" + b.expand(strings.Join(b.extra, "\n")) + "\n"
	}
	if err := os.WriteFile(b.configPath(), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	id := b.clusterID
	if id == "" {
		id = newClusterID(t)
	}
	mode := b.formatMode
	if mode == nil {
		mode = []string{"--standalone"}
	}
	args := append(append(b.jvmFlags("-Xmx256m"), "kafka.tools.StorageTool", "format"), mode...)
	args = append(args, "-t", id, "-c", b.configPath())
	for _, a := range b.formatArgs {
		args = append(args, b.expand(a))
	}
	cmd := exec.Command(b.java, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kafka.tools.StorageTool format -c %s: %v\n%s", b.configPath(), err, tail(out, 4096))
	}
}

// newClusterID is a random KRaft cluster ID. Like Kafka's own (and
// brokerctl cluster-id), it never starts with '-': StorageTool's argument
// parser would take such an ID for an option and refuse to format (1 ID
// in 64).
func newClusterID(t *testing.T) string {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

func (b *dedicatedBroker) configPath() string { return filepath.Join(b.dir, "server.properties") }

func (b *dedicatedBroker) jvmFlags(heap ...string) []string {
	return append(append([]string{"-Djava.awt.headless=true",
		"-Dkafka.logs.dir=" + filepath.Join(b.dir, "logs"),
		"-Dlog4j2.configurationFile=" + mustAbs(b.t, filepath.Join("kafka", "log4j2.properties"))},
		heap...), "-cp", b.classpath)
}

// start runs kafka.Kafka on the current config and data dir and waits until
// it answers Metadata; it returns an error if the JVM exits first or the
// budget ends.
func (b *dedicatedBroker) start() error {
	b.t.Helper()
	if err := b.launch(); err != nil {
		return err
	}
	return b.waitReady()
}

// launch starts kafka.Kafka on the current config and data dir, without
// waiting for it.
func (b *dedicatedBroker) launch() error {
	b.t.Helper()
	out, err := os.OpenFile(filepath.Join(b.dir, "broker.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	defer out.Close() // the child has its own descriptor
	b.starts++
	fmt.Fprintf(out, "---- start %d\n", b.starts)
	cmd := exec.Command(b.java, append(b.jvmFlags("-Xms256m", "-Xmx256m", "-XX:+UseG1GC"), "kafka.Kafka", b.configPath())...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s kafka.Kafka: %w", b.java, err)
	}
	exited := make(chan struct{})
	b.cmd, b.exited = cmd, exited
	go func() { _ = cmd.Wait(); close(exited) }()
	return nil
}

// waitReady waits until the launched broker answers Metadata; it returns
// an error if the JVM exits first or the budget ends.
func (b *dedicatedBroker) waitReady() error {
	cmd, exited := b.cmd, b.exited
	ctx, cancel := context.WithTimeout(context.Background(), dedicatedReadyBudget)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- b.waitAnswer(ctx) }()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("broker at %v (pid %d) did not answer Metadata within %v: %w", b.Addrs(), cmd.Process.Pid, dedicatedReadyBudget, err)
		}
		return nil
	case <-exited:
		cancel()
		<-ready
		return fmt.Errorf("broker (pid %d) exited during startup: %v", cmd.Process.Pid, cmd.ProcessState)
	}
}

// waitAnswer returns once the broker answers a Metadata request, or
// ctx's error with the last failure. Each attempt has a Transport of its
// own: a kafka-go Transport answers Metadata from its cache (of the killed
// process, for one shared with earlier requests), and after a failed
// connect it keeps returning that error until its MetadataTTL (6 s) ends,
// which would notice the restarted broker seconds late.
func (b *dedicatedBroker) waitAnswer(ctx context.Context) error {
	var last error
	for {
		tr := &kafka.Transport{}
		cl := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 2 * time.Second, Transport: tr}
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
		tr.CloseIdleConnections()
		if err == nil && len(md.Brokers) > 0 {
			return nil
		}
		if err == nil {
			err = errors.New("Metadata lists no broker")
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill9 sends SIGKILL to the broker and waits until the process is gone:
// no shutdown hook runs, nothing is flushed.
func (b *dedicatedBroker) Kill9() {
	b.t.Helper()
	if b.cmd == nil {
		b.t.Fatalf("%s: Kill9 without a running broker", b.name)
	}
	if err := b.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		b.t.Fatalf("kill -9 of %s (pid %d): %v", b.name, b.cmd.Process.Pid, err)
	}
	<-b.exited
	b.cmd = nil
	// The suite's helpers (createTopic, deliverytest) use kafka-go's
	// DefaultTransport, whose pool still holds connections to the killed
	// process: drop them, or the next request on one reads EOF.
	if tr, ok := kafka.DefaultTransport.(*kafka.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// Restart starts the broker again on the same log dir and ports and waits
// until it answers Metadata.
func (b *dedicatedBroker) Restart() {
	b.t.Helper()
	if b.cmd != nil {
		b.t.Fatalf("%s: Restart while it runs; Kill9 or Terminate first", b.name)
	}
	if err := b.start(); err != nil {
		b.t.Fatalf("%s restart on %s: %v", b.name, b.dir, err)
	}
}

// Terminate sends SIGTERM, Kafka's controlled shutdown (the broker hands
// its leaderships over before it stops), and waits until the process is
// gone, at most budget; past it the broker is killed and the test fails.
func (b *dedicatedBroker) Terminate(budget time.Duration) {
	b.t.Helper()
	if b.cmd == nil {
		b.t.Fatalf("%s: Terminate without a running broker", b.name)
	}
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.t.Fatalf("SIGTERM to %s (pid %d): %v", b.name, b.cmd.Process.Pid, err)
	}
	select {
	case <-b.exited:
		b.cmd = nil
	case <-time.After(budget):
		b.kill()
		b.t.Fatalf("%s did not stop within %v of SIGTERM", b.name, budget)
	}
	if tr, ok := kafka.DefaultTransport.(*kafka.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// kill stops the broker, if it runs, at the end of the test.
func (b *dedicatedBroker) kill() {
	if b.cmd != nil {
		_ = b.cmd.Process.Kill()
		<-b.exited
		b.cmd = nil
	}
}

func (b *dedicatedBroker) logFiles() []string {
	return []string{filepath.Join(b.dir, "logs", "server.log"), filepath.Join(b.dir, "broker.out")}
}

func (b *dedicatedBroker) logContains(s string) bool {
	for _, f := range b.logFiles() {
		if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), s) {
			return true
		}
	}
	return false
}

// printLogTail logs the last n lines of the broker's log and console.
func (b *dedicatedBroker) printLogTail(n int) {
	for _, f := range b.logFiles() {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		b.t.Logf("---- last %d lines of %s's %s\n%s", n, b.name, f, strings.Join(lines[max(0, len(lines)-n):], "\n"))
	}
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // held until all are picked, so they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
