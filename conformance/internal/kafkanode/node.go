// Package kafkanode runs Apache Kafka KRaft nodes (broker and controller in
// one process) on loopback from the jars conformance/run.sh resolves: a
// single node, or the 3-node cluster with racks az-a, az-b and az-c. The
// conformance tests start theirs with it, and so does `brokerctl cluster`
// (make cluster).
//
//	nodes, err := kafkanode.StartCluster(ctx, setup, dir, kafkanode.ClusterConfig{})
//	defer kafkanode.StopAll(nodes, 15*time.Second)
//
// A Node's methods must not be called concurrently with each other;
// different nodes are independent.
package kafkanode

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
)

// ReadyBudget bounds one start of a node, JVM start and log recovery
// included (a shared 2-core machine is slow to start a JVM).
const ReadyBudget = 2 * time.Minute

// Setup is what every node starts from.
type Setup struct {
	// Java is the java binary.
	Java string
	// Classpath is the broker's Java classpath (ReadClasspath reads the
	// file run.sh writes).
	Classpath string
	// ConfDir holds the config template server.properties.in and
	// log4j2.properties: conformance/kafka.
	ConfDir string
}

// JavaBinary returns $JAVA_HOME/bin/java if it exists, else java from
// PATH.
func JavaBinary() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", errors.New("no java on PATH (and none in $JAVA_HOME/bin): Kafka 4.3.1 needs a JDK 17+")
	}
	return p, nil
}

// ReadClasspath returns the classpath in file, as run.sh writes it
// (AZKAFKA_CONFORMANCE_BROKER_CLASSPATH).
func ReadClasspath(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	cp := strings.TrimSpace(string(b))
	if cp == "" {
		return "", fmt.Errorf("%s: no classpath in it", file)
	}
	return cp, nil
}

// Node is one Apache Kafka broker+controller process on loopback: its
// config is the template with Extra appended, its data and logs are in
// Dir. It can be killed, stopped and started again on the same data.
type Node struct {
	Setup
	// Name names the node in errors: "dedicated broker", "node 2 (az-b)".
	Name string
	// Dir holds the config, the data and the logs.
	Dir string
	// BrokerPort and ControllerPort are the PLAINTEXT and CONTROLLER
	// listeners' ports.
	BrokerPort, ControllerPort int
	// Named ports: @NAME@ in Extra and FormatArgs is replaced by
	// Named[NAME] (a further listener's port).
	Named map[string]int
	// Extra lines are appended to the template (a later key overrides
	// the template's).
	Extra []string
	// FormatArgs are added to kafka.tools.StorageTool format (e.g.
	// --add-scram SCRAM-SHA-512=[name=u,password=p]).
	FormatArgs []string
	// ClusterID is the KRaft cluster ID the data dir is formatted with; a
	// random one when empty. The nodes of a cluster share it.
	ClusterID string
	// FormatMode is how StorageTool format learns the controller quorum:
	// nil means --standalone (a single node); a cluster's nodes list the
	// voters in their config (controller.quorum.voters) and pass none.
	FormatMode []string
	// Starts counts the starts of the process.
	Starts int

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Addrs is the node's bootstrap address (its PLAINTEXT listener).
func (n *Node) Addrs() []string {
	return []string{"127.0.0.1:" + strconv.Itoa(n.BrokerPort)}
}

// Running reports whether the node's process was started and has not been
// killed or stopped through the Node.
func (n *Node) Running() bool { return n.cmd != nil }

// Pid is the process ID of the running node, 0 when it is not running.
func (n *Node) Pid() int {
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Exited is closed when the running node's process has exited (nil when it
// is not running).
func (n *Node) Exited() <-chan struct{} { return n.exited }

// expand replaces @BROKER_PORT@, @CONTROLLER_PORT@ and @NAME@ of every
// named port.
func (n *Node) expand(s string) string {
	s = strings.NewReplacer("@BROKER_PORT@", strconv.Itoa(n.BrokerPort), "@CONTROLLER_PORT@", strconv.Itoa(n.ControllerPort)).Replace(s)
	for name, port := range n.Named {
		s = strings.ReplaceAll(s, "@"+name+"@", strconv.Itoa(port))
	}
	return s
}

// ConfigPath is the node's server.properties.
func (n *Node) ConfigPath() string { return filepath.Join(n.Dir, "server.properties") }

// Format writes server.properties and formats a fresh data dir (the old
// data, logs and console output are removed), as run.sh does for its
// broker.
func (n *Node) Format() error {
	tmpl, err := os.ReadFile(filepath.Join(n.ConfDir, "server.properties.in"))
	if err != nil {
		return fmt.Errorf("%s: config template: %w", n.Name, err)
	}
	data := filepath.Join(n.Dir, "data")
	for _, d := range []string{data, filepath.Join(n.Dir, "logs"), n.consolePath()} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	conf := strings.NewReplacer("@BROKER_PORT@", strconv.Itoa(n.BrokerPort),
		"@CONTROLLER_PORT@", strconv.Itoa(n.ControllerPort), "@DATA_DIR@", data).Replace(string(tmpl))
	if len(n.Extra) > 0 {
		conf += "\n# Added by the owner of this node.\n" + n.expand(strings.Join(n.Extra, "\n")) + "\n"
	}
	if err := os.WriteFile(n.ConfigPath(), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	id := n.ClusterID
	if id == "" {
		if id, err = NewClusterID(rand.Reader); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	mode := n.FormatMode
	if mode == nil {
		mode = []string{"--standalone"}
	}
	args := append(append(n.jvmFlags("-Xmx256m"), "kafka.tools.StorageTool", "format"), mode...)
	args = append(args, "-t", id, "-c", n.ConfigPath())
	for _, a := range n.FormatArgs {
		args = append(args, n.expand(a))
	}
	if out, err := exec.Command(n.Java, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: kafka.tools.StorageTool format -c %s: %v\n%s", n.Name, n.ConfigPath(), err, tail(out, 4096))
	}
	return nil
}

func (n *Node) jvmFlags(heap ...string) []string {
	log4j, err := filepath.Abs(filepath.Join(n.ConfDir, "log4j2.properties"))
	if err != nil {
		log4j = filepath.Join(n.ConfDir, "log4j2.properties")
	}
	return append(append([]string{"-Djava.awt.headless=true",
		"-Dkafka.logs.dir=" + filepath.Join(n.Dir, "logs"),
		"-Dlog4j2.configurationFile=" + log4j},
		heap...), "-cp", n.Classpath)
}

func (n *Node) consolePath() string { return filepath.Join(n.Dir, "broker.out") }

// Start runs kafka.Kafka on the current config and data dir and waits
// until it answers Metadata; it fails if the JVM exits first or
// ReadyBudget ends.
func (n *Node) Start() error {
	if err := n.Launch(); err != nil {
		return err
	}
	return n.WaitReady()
}

// Launch starts kafka.Kafka on the current config and data dir, without
// waiting for it. Its console output is appended to Dir/broker.out.
func (n *Node) Launch() error {
	if n.cmd != nil {
		return fmt.Errorf("%s: already running (pid %d)", n.Name, n.cmd.Process.Pid)
	}
	out, err := os.OpenFile(n.consolePath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	defer out.Close() // the child has its own descriptor
	n.Starts++
	fmt.Fprintf(out, "---- start %d\n", n.Starts)
	cmd := exec.Command(n.Java, append(n.jvmFlags("-Xms256m", "-Xmx256m", "-XX:+UseG1GC"), "kafka.Kafka", n.ConfigPath())...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: starting %s kafka.Kafka: %w", n.Name, n.Java, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited = cmd, exited
	go func() { _ = cmd.Wait(); close(exited) }()
	return nil
}

// WaitReady waits until the launched node answers Metadata; it fails if
// the JVM exits first or ReadyBudget ends.
func (n *Node) WaitReady() error { return n.waitReady(context.Background()) }

// waitReady is WaitReady, also giving up when ctx ends.
func (n *Node) waitReady(ctx context.Context) error {
	cmd, exited := n.cmd, n.exited
	if cmd == nil {
		return fmt.Errorf("%s: not launched", n.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, ReadyBudget)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- waitAnswer(ctx, n.Addrs(), 1) }()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("%s at %v (pid %d) did not answer Metadata within %v: %w", n.Name, n.Addrs(), cmd.Process.Pid, ReadyBudget, err)
		}
		return nil
	case <-exited:
		cancel()
		<-ready
		return fmt.Errorf("%s (pid %d) exited during startup: %v", n.Name, cmd.Process.Pid, cmd.ProcessState)
	}
}

// waitAnswer returns once a broker at addrs answers a Metadata request
// listing at least brokers brokers, or ctx's error with the last failure.
// Each attempt has a Transport of its own: a kafka-go Transport answers
// Metadata from its cache (of a killed process, for one shared with
// earlier requests), and after a failed connect it keeps returning that
// error until its MetadataTTL (6 s) ends, which would notice a restarted
// broker seconds late.
func waitAnswer(ctx context.Context, addrs []string, brokers int) error {
	var last error
	for {
		tr := &kafka.Transport{}
		cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 2 * time.Second, Transport: tr}
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
		tr.CloseIdleConnections()
		if err == nil && len(md.Brokers) >= brokers {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("the Metadata response lists %d of %d brokers", len(md.Brokers), brokers)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL to the node and waits until the process is gone: no
// shutdown hook runs, nothing is flushed. It does nothing when the node
// is not running.
func (n *Node) Kill() error {
	if n.cmd == nil {
		return nil
	}
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill -9 of %s (pid %d): %w", n.Name, n.cmd.Process.Pid, err)
	}
	<-n.exited
	n.cmd, n.exited = nil, nil
	return nil
}

// Terminate sends SIGTERM, Kafka's controlled shutdown (the broker hands
// its leaderships over before it stops), and waits until the process is
// gone, at most budget; past it the node is killed and the error says so.
// It does nothing when the node is not running.
func (n *Node) Terminate(budget time.Duration) error {
	if n.cmd == nil {
		return nil
	}
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = n.Kill()
		return fmt.Errorf("SIGTERM to %s: %w", n.Name, err)
	}
	select {
	case <-n.exited:
		n.cmd, n.exited = nil, nil
		return nil
	case <-time.After(budget):
		pid := n.cmd.Process.Pid
		_ = n.Kill()
		return fmt.Errorf("%s (pid %d) did not stop within %v of SIGTERM: killed", n.Name, pid, budget)
	}
}

// LogFiles are the node's log and console output.
func (n *Node) LogFiles() []string {
	return []string{filepath.Join(n.Dir, "logs", "server.log"), n.consolePath()}
}

// LogContains reports whether the node's log or console output holds s.
func (n *Node) LogContains(s string) bool {
	for _, f := range n.LogFiles() {
		if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), s) {
			return true
		}
	}
	return false
}

// LogTails returns, per non-empty log file, a header and its last lines.
func (n *Node) LogTails(lines int) []string {
	var out []string
	for _, f := range n.LogFiles() {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			continue
		}
		ls := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		out = append(out, fmt.Sprintf("---- last %d lines of %s's %s\n%s", lines, n.Name, f, strings.Join(ls[max(0, len(ls)-lines):], "\n")))
	}
	return out
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1. All n
// listeners stay open until every port is chosen, so the ports differ;
// another process may still take one before the broker binds it. The
// ports are picked at random below the kernel's ephemeral range (where
// it can tell it, on Linux): the kernel gives every outgoing connection a
// local port from that range, and one given the port between the pick and
// the broker's bind would keep the broker from starting.
func FreePorts(n int) ([]int, error) {
	lo, hi := belowEphemeral()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if hi > lo && tries < 100*n {
			var b [2]byte
			if _, err := rand.Read(b[:]); err != nil {
				return nil, err
			}
			addr = "127.0.0.1:" + strconv.Itoa(lo+(int(b[0])<<8|int(b[1]))%(hi-lo))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // taken: pick another
			}
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// belowEphemeral is the range FreePorts picks from: [lo, hi), from 10000
// to the first port of /proc/sys/net/ipv4/ip_local_port_range; lo == hi
// when that cannot be read or leaves fewer than 1000 ports.
func belowEphemeral() (lo, hi int) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0
	}
	first, err := strconv.Atoi(f[0])
	if err != nil || first < 11000 {
		return 0, 0
	}
	return 10000, first
}

// NewClusterID returns a KRaft cluster ID in the form Kafka's
// Uuid.toString produces: 16 random bytes, URL-safe base64 without padding
// (22 characters). Like Kafka's, it never starts with '-': StorageTool's
// argument parser would take it for an option and refuse to format.
func NewClusterID(random io.Reader) (string, error) {
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

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[len(b)-n:]
}
