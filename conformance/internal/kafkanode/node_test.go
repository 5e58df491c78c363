package kafkanode

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

// fakeJava writes a shell script standing in for java: it records its
// arguments in dir/args, one per line, then runs body.
func fakeJava(t *testing.T, body string) (java, args string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs /bin/sh")
	}
	dir := t.TempDir()
	args = filepath.Join(dir, "args")
	java = filepath.Join(dir, "java")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + args + "\n" + body + "\n"
	if err := os.WriteFile(java, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return java, args
}

func confDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", "..", "kafka"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func readLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// TestFormat: the config is the template with the ports, the data dir and
// the extra lines (named ports expanded); StorageTool gets --standalone
// for a single node, nothing for a cluster's, the cluster ID and the
// expanded format arguments.
func TestFormat(t *testing.T) {
	java, args := fakeJava(t, "exit 0")
	for _, mode := range [][]string{nil, {}} {
		dir := t.TempDir()
		n := &Node{Setup: Setup{Java: java, Classpath: "a.jar:b.jar", ConfDir: confDir(t)}, Name: "test node", Dir: dir,
			BrokerPort: 19092, ControllerPort: 19093, Named: map[string]int{"SASL_PORT": 19094},
			Extra: []string{"listeners=SASL://127.0.0.1:@SASL_PORT@", "broker.rack=az-b"}, FormatArgs: []string{"--add-scram", "port=@SASL_PORT@"},
			ClusterID: "AAAAAAAAAAAAAAAAAAAAAA", FormatMode: mode}
		if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "broker.out"), []byte("Address already in use\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := n.Format(); err != nil {
			t.Fatal(err)
		}
		conf := strings.Join(readLines(t, n.ConfigPath()), "\n")
		for _, want := range []string{"listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
			"log.dirs=" + filepath.Join(dir, "data"), "listeners=SASL://127.0.0.1:19094\nbroker.rack=az-b"} {
			if !strings.Contains(conf, want) {
				t.Errorf("config lacks %q:\n%s", want, conf)
			}
		}
		if strings.Contains(conf, "@") {
			t.Errorf("config keeps a placeholder:\n%s", conf)
		}
		if n.LogContains("Address already in use") {
			t.Error("a format kept the old console output")
		}
		got := readLines(t, args)
		i := slices.Index(got, "format")
		if i < 0 || got[i-1] != "kafka.tools.StorageTool" || !slices.Contains(got, "a.jar:b.jar") {
			t.Fatalf("StorageTool args %q", got)
		}
		want := []string{"-t", "AAAAAAAAAAAAAAAAAAAAAA", "-c", n.ConfigPath(), "--add-scram", "port=19094"}
		if mode == nil {
			want = append([]string{"--standalone"}, want...)
		}
		if !slices.Equal(got[i+1:], want) {
			t.Errorf("format mode %v: StorageTool format %q, want %q", mode, got[i+1:], want)
		}
	}
}

// TestLaunchWaitReadyStop: a launched node is ready once its port answers
// Metadata (here the embedded broker's, a sleeping script standing in for
// the JVM); Terminate and Kill stop it, and it starts again on the same
// dir.
func TestLaunchWaitReadyStop(t *testing.T) {
	java, args := fakeJava(t, "exec sleep 60")
	c := embedded.StartT(t)
	_, port, _ := strings.Cut(c.Addrs()[0], ":")
	p, _ := strconv.Atoi(port)
	n := &Node{Setup: Setup{Java: java, Classpath: "k.jar", ConfDir: confDir(t)}, Name: "test node", Dir: t.TempDir(), BrokerPort: p}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if !n.Running() || n.Pid() <= 0 {
		t.Fatalf("running %v, pid %d", n.Running(), n.Pid())
	}
	// The broker answered before the script ran its printf, maybe.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(args); bytes.HasSuffix(b, []byte(n.ConfigPath()+"\n")) {
			break
		}
	}
	if got := readLines(t, args); len(got) < 2 || got[len(got)-2] != "kafka.Kafka" || got[len(got)-1] != n.ConfigPath() {
		t.Errorf("launched with %q", got)
	}
	if err := n.Launch(); err == nil {
		t.Error("a second Launch of a running node succeeded")
	}
	if err := n.Terminate(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n.Running() || n.Pid() != 0 {
		t.Fatalf("after Terminate: running %v, pid %d", n.Running(), n.Pid())
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(); err != nil || n.Running() {
		t.Fatalf("Kill: %v, running %v", err, n.Running())
	}
	if n.Starts != 2 || !n.LogContains("---- start 2") {
		t.Errorf("starts %d; console:\n%s", n.Starts, strings.Join(n.LogTails(10), "\n"))
	}
	if err := n.Kill(); err != nil {
		t.Errorf("Kill of a stopped node: %v", err)
	}
}

// TestWaitReadyNoticesExit: a JVM that exits during startup fails the
// wait at once, naming the node.
func TestWaitReadyNoticesExit(t *testing.T) {
	java, _ := fakeJava(t, "echo no luck; exit 3")
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Setup: Setup{Java: java, ConfDir: confDir(t)}, Name: "test node", Dir: t.TempDir(), BrokerPort: ports[0]}
	start := time.Now()
	err = n.Start()
	if err == nil || !strings.Contains(err.Error(), "test node") || !strings.Contains(err.Error(), "exited during startup") {
		t.Fatalf("Start = %v, want the node's exit", err)
	}
	if time.Since(start) > ReadyBudget/2 {
		t.Errorf("noticed the exit after %v", time.Since(start))
	}
	if !n.LogContains("no luck") {
		t.Error("the console output is not in broker.out")
	}
}

// TestClusterNodes: one node per rack, each on its own ports, all in one
// static quorum of the controller ports, with the caller's ports and
// lines.
func TestClusterNodes(t *testing.T) {
	ports := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	nodes := clusterNodes(Setup{Java: "java"}, "/d", ports, "ID", ClusterConfig{
		Ports: []string{"TLS_PORT"}, FormatArgs: []string{"--x"},
		Extra: func(id int) []string { return []string{"extra=" + strconv.Itoa(id)} }})
	if len(nodes) != 3 {
		t.Fatalf("%d nodes", len(nodes))
	}
	for i, n := range nodes {
		id := i + 1
		if n.BrokerPort != ports[i*3] || n.ControllerPort != ports[i*3+1] || n.Named["TLS_PORT"] != ports[i*3+2] {
			t.Errorf("node %d: ports %d %d %v", id, n.BrokerPort, n.ControllerPort, n.Named)
		}
		if n.Dir != filepath.Join("/d", "node-"+strconv.Itoa(id)) || n.ClusterID != "ID" || n.FormatMode == nil || len(n.FormatMode) != 0 || !slices.Equal(n.FormatArgs, []string{"--x"}) {
			t.Errorf("node %d: dir %q, cluster ID %q, format mode %#v, args %q", id, n.Dir, n.ClusterID, n.FormatMode, n.FormatArgs)
		}
		for _, want := range []string{"node.id=" + strconv.Itoa(id), "broker.rack=" + Racks[i],
			"controller.quorum.voters=1@127.0.0.1:2,2@127.0.0.1:5,3@127.0.0.1:8", "extra=" + strconv.Itoa(id)} {
			if !slices.Contains(n.Extra, want) {
				t.Errorf("node %d: config lacks %q: %q", id, want, n.Extra)
			}
		}
		if n.Extra[len(n.Extra)-1] != "extra="+strconv.Itoa(id) {
			t.Errorf("node %d: the caller's lines do not come last (they must override): %q", id, n.Extra)
		}
	}
}

func TestNewClusterIDSkipsLeadingDash(t *testing.T) {
	// 0xfb encodes to '-' as the first base64url character.
	dash := bytes.Repeat([]byte{0xfb}, 16)
	plain := bytes.Repeat([]byte{0x01}, 16)
	id, err := NewClusterID(bytes.NewReader(append(dash, plain...)))
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.RawURLEncoding.EncodeToString(plain); id != want {
		t.Fatalf("NewClusterID = %q, want %q", id, want)
	}
	if _, err := NewClusterID(bytes.NewReader(bytes.Repeat([]byte{0xfb}, 16*100))); err == nil {
		t.Error("no error from a source that only makes IDs starting with '-'")
	}
}
