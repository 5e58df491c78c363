package main

import (
	"bytes"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

func TestPortsAreDistinctAndBindable(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"ports", "5"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	lines := strings.Fields(out.String())
	if len(lines) != 5 {
		t.Fatalf("got %d ports, want 5: %q", len(lines), out.String())
	}
	seen := map[string]bool{}
	for _, p := range lines {
		if seen[p] {
			t.Errorf("port %s printed twice", p)
		}
		seen[p] = true
		if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
			t.Errorf("port %q is not a TCP port", p)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+p)
		if err != nil {
			t.Errorf("port %s is not free: %v", p, err)
			continue
		}
		l.Close()
	}
}

func TestClusterIDIsAKafkaUuid(t *testing.T) {
	for i := range 50 {
		var out, errOut bytes.Buffer
		if code := run([]string{"cluster-id"}, &out, &errOut); code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, errOut.String())
		}
		id := strings.TrimSpace(out.String())
		b, err := base64.RawURLEncoding.Strict().DecodeString(id)
		if err != nil || len(b) != 16 || len(id) != 22 || id[0] == '-' {
			t.Fatalf("run %d: cluster ID %q is not 22 base64url characters of 16 bytes (err %v)", i, id, err)
		}
	}
}

func TestWait(t *testing.T) {
	c := embedded.StartT(t)
	dead := deadAddr(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		maxTime  time.Duration
	}{
		{"live broker", []string{"wait", "-timeout", "10s", c.Addrs()[0]}, exitOK, 10 * time.Second},
		{"dead port gives up at the timeout", []string{"wait", "-timeout", "500ms", dead}, exitFail, 5 * time.Second},
		{"no address", []string{"wait"}, exitUsage, time.Second},
		{"bad timeout", []string{"wait", "-timeout", "soon", dead}, exitUsage, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			start := time.Now()
			code := run(tt.args, &out, &errOut)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tt.wantCode, out.String(), errOut.String())
			}
			if took := time.Since(start); took > tt.maxTime {
				t.Errorf("took %v, budget %v", took, tt.maxTime)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"ports"}, {"ports", "x"}, {"ports", "0"}, {"ports", "101"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != exitUsage {
			t.Errorf("run(%q) = %d, want %d", args, code, exitUsage)
		}
		if errOut.Len() == 0 {
			t.Errorf("run(%q) printed no usage message", args)
		}
	}
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestClusterErrors: cluster refuses bad usage with status 2, and fails
// with 1 naming the cause when the classpath file, the config directory
// or the JVM fails (a script standing in for java that exits at once).
func TestClusterErrors(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs /bin/sh")
	}
	t.Setenv("AZKAFKA_CONFORMANCE_BROKER_CLASSPATH", "")
	dir := t.TempDir()
	cp := filepath.Join(dir, "classpath.txt")
	java := filepath.Join(dir, "java")
	if err := os.WriteFile(cp, []byte("kafka.jar\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(java, []byte("#!/bin/sh\necho \"JVM refused: $*\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// formats, then dies as kafka.Kafka
	dies := filepath.Join(dir, "java-dies")
	if err := os.WriteFile(dies, []byte("#!/bin/sh\ncase \"$*\" in *kafka.Kafka*) echo 'broker gave up' >&2; exit 1;; esac\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join("..", "..", "kafka")
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"cluster"}, exitUsage, "want -classpath FILE"},
		{[]string{"cluster", "-classpath", cp, "extra"}, exitUsage, "want -classpath FILE"},
		{[]string{"cluster", "-classpth", cp}, exitUsage, "flag provided but not defined"},
		{[]string{"cluster", "-classpath", filepath.Join(dir, "none")}, exitFail, "-classpath: open"},
		{[]string{"cluster", "-classpath", cp, "-java", java, "-conf", dir}, exitFail, "server.properties.in"},
		{[]string{"cluster", "-classpath", cp, "-java", java, "-conf", conf, "-dir", t.TempDir()}, exitFail, "StorageTool format"},
		{[]string{"cluster", "-classpath", cp, "-java", dies, "-conf", conf}, exitFail, "exited during startup"},
		{[]string{"cluster", "-classpath", cp, "-java", dies, "-conf", conf}, exitFail, "broker gave up"}, // the log's tail
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != tc.wantCode || !strings.Contains(errOut.String(), tc.wantErr) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), tc.wantCode, tc.wantErr)
		}
	}
}
