package main

import (
	"bytes"
	"encoding/base64"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/embedded"
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

func TestClusterIDSkipsLeadingDash(t *testing.T) {
	// 0xfb encodes to '-' as the first base64url character.
	dash := bytes.Repeat([]byte{0xfb}, 16)
	plain := bytes.Repeat([]byte{0x01}, 16)
	id, err := clusterID(bytes.NewReader(append(dash, plain...)))
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.RawURLEncoding.EncodeToString(plain); id != want {
		t.Fatalf("clusterID = %q, want %q", id, want)
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
