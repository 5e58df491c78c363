package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
)

func khKeys(sep string) string {
	var ks []string
	for i := 1; i <= 32; i++ {
		ks = append(ks, fmt.Sprintf("KH%02d", i))
	}
	return strings.Join(ks, sep)
}

func TestPartitionCommand(t *testing.T) {
	keysFile := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(keysFile, []byte("KH01\r\nKH07, KH32\n\nKH01\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		stdin      string
		code       int
		wantOut    []string
		wantErr    []string
		notWantOut []string
	}{
		{"stdin lines, 3 to 6", []string{"--partitions", "3,6"}, khKeys("\n"), exitOK,
			[]string{"3 -> 6 partitions: 16 of 32 keys move", "3 partitions: load"}, nil, nil},
		{"arguments, known placements", []string{"--partitions=3,8", "KH01", "KH07", "KH32"}, "", exitOK,
			[]string{"KH01  0             6", "KH07  2             6", "KH32  1             1", "3 -> 8 partitions: 2 of 3 keys move: KH01, KH07"}, nil, nil},
		{"flags after keys, comma list", []string{"KH01,KH07", "--partitions", "8"}, "", exitOK,
			[]string{"8 partitions: load [0 0 0 0 0 0 2 0]; max 2 vs ideal 0.25 (skew 8.00x); 7 empty"}, nil, []string{"->"}},
		{"keys file, duplicates and blanks dropped", []string{"--keys-file", keysFile, "--partitions", "3"}, "", exitOK,
			[]string{"3 partitions: load [1 1 1]"}, nil, nil},
		{"help", []string{"-h"}, "", exitOK, []string{"sticky partitioner", "not spread round-robin", "Kafka 2.4", "3.3"}, nil, nil},
		{"no partitions", []string{"KH01"}, "", exitUsage, nil, []string{"--partitions is required"}, nil},
		{"bad count", []string{"--partitions", "3,x", "KH01"}, "", exitUsage, nil, []string{`--partitions "3,x": "x" is not a partition count`}, nil},
		{"zero count", []string{"--partitions", "0", "KH01"}, "", exitUsage, nil, []string{`"0" is not a partition count`}, nil},
		{"no keys", []string{"--partitions", "3"}, " , \n", exitUsage, nil, []string{"no keys"}, nil},
		{"bad serde", []string{"--partitions", "3", "--key-serde", "avro", "k"}, "", exitUsage, nil, []string{`--key-serde "avro"`}, nil},
		{"bad int key", []string{"--partitions", "3", "--key-serde", "int64", "abc"}, "", exitUsage, nil, []string{`key "abc": not an int64`}, nil},
		{"missing keys file", []string{"--partitions", "3", "--keys-file", "/nonexistent/k"}, "", exitUsage, nil, []string{"--keys-file", "no such file"}, nil},
		{"unknown flag", []string{"--partitons", "3"}, "", exitUsage, nil, []string{"flag provided but not defined"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"partition"}, tt.args...), strings.NewReader(tt.stdin), &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out.String(), errb.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.notWantOut {
				if strings.Contains(out.String(), w) {
					t.Errorf("stdout has %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}
}

func TestPartitionCommandJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"partition", "--json", "--partitions", "3,6,8"}, strings.NewReader(khKeys(",")), &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc struct {
		Partitions map[string]map[string]int `json:"partitions"`
		Moved      map[string]int            `json:"moved"`
		Load       map[string][]int          `json:"load"`
	}
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n, key string
		p      int
	}{{"3", "KH01", 0}, {"3", "KH07", 2}, {"3", "KH32", 1}, {"8", "KH01", 6}, {"8", "KH07", 6}, {"8", "KH32", 1}} {
		if got, ok := doc.Partitions[c.n][c.key]; !ok || got != c.p {
			t.Errorf("partitions[%s][%s] = %d (%v), want %d", c.n, c.key, got, ok, c.p)
		}
	}
	if len(doc.Moved) != 6 {
		t.Errorf("moved has %d pairs, want all 6 ordered pairs: %v", len(doc.Moved), doc.Moved)
	}
	if doc.Moved["3->6"] != 16 || doc.Moved["6->3"] != 16 {
		t.Errorf("moved 3<->6 = %d/%d, want 16", doc.Moved["3->6"], doc.Moved["6->3"])
	}
	for n, want := range map[string]int{"3": 3, "6": 6, "8": 8} {
		load := doc.Load[n]
		sum := 0
		for _, c := range load {
			sum += c
		}
		if len(load) != want || sum != 32 || len(doc.Partitions[n]) != 32 {
			t.Errorf("load[%s] = %v: want %d partitions summing to 32", n, load, want)
		}
	}
}

// The int32 serde must place keys as kafka-go's independent murmur2 does on
// IntegerSerializer bytes (4 bytes, big-endian).
func TestPartitionCommandInt32Serde(t *testing.T) {
	for _, k := range []int32{1, -7, 123456} {
		b := []byte{byte(uint32(k) >> 24), byte(uint32(k) >> 16), byte(uint32(k) >> 8), byte(k)}
		want := kafka.Murmur2Balancer{Consistent: true}.Balance(kafka.Message{Key: b}, 0, 1, 2, 3, 4, 5, 6)
		var out, errb bytes.Buffer
		if code := run([]string{"partition", "--json", "--key-serde", "int32", "--partitions", "7", "--", fmt.Sprint(k)}, nil, &out, &errb); code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var doc struct{ Partitions map[string]map[string]int }
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if got := doc.Partitions["7"][fmt.Sprint(k)]; got != want {
			t.Errorf("key %d: partition %d, kafka-go says %d", k, got, want)
		}
	}
}

// hintReader is standard input that records whether the hint was on
// stderr when the command first read it.
type hintReader struct {
	r         io.Reader
	stderr    *bytes.Buffer
	read      bool
	hintFirst bool
}

func (h *hintReader) Read(p []byte) (int, error) {
	if !h.read {
		h.read = true
		h.hintFirst = strings.Contains(h.stderr.String(), "reading keys from standard input")
	}
	return h.r.Read(p)
}

// TestPartitionStdinHint: on a terminal, partition says on stderr that it
// reads keys from standard input before it first reads; from a pipe or a
// file it says nothing.
func TestPartitionStdinHint(t *testing.T) {
	old := isTerminal
	t.Cleanup(func() { isTerminal = old })
	for _, terminal := range []bool{true, false} {
		for _, args := range [][]string{{"--partitions", "3"}, {"--partitions", "3", "--keys-file", "-"}} {
			isTerminal = func(io.Reader) bool { return terminal }
			var out, errb bytes.Buffer
			in := &hintReader{r: strings.NewReader("KH01\n"), stderr: &errb}
			if code := run(append([]string{"partition"}, args...), in, &out, &errb); code != exitOK {
				t.Fatalf("%v: exit %d: %s", args, code, errb.String())
			}
			if !in.read || in.hintFirst != terminal {
				t.Errorf("%v, terminal %v: stdin read %v, hint before the first read %v; stderr %q", args, terminal, in.read, in.hintFirst, errb.String())
			}
			if want := "(one per line or comma-separated; " + endOfInput + " to end)...\n"; terminal && !strings.HasSuffix(errb.String(), want) {
				t.Errorf("stderr %q, want it to end with %q", errb.String(), want)
			}
		}
	}
	// Keys given as arguments: standard input is not read, nothing said.
	isTerminal = func(io.Reader) bool { return true }
	var out, errb bytes.Buffer
	if code := run([]string{"partition", "--partitions", "3", "KH01"}, nil, &out, &errb); code != exitOK || errb.Len() > 0 {
		t.Errorf("keys as arguments: exit %d, stderr %q", code, errb.String())
	}
}

// TestIsTerminal: a pipe, a regular file and a non-file reader are not
// terminals; a character device is (/dev/null stands in for a tty).
func TestIsTerminal(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	f, err := os.Create(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, r := range map[string]io.Reader{"pipe": pr, "file": f, "strings.Reader": strings.NewReader("")} {
		if isTerminal(r) {
			t.Errorf("%s: isTerminal = true", name)
		}
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Skip(err)
	}
	defer null.Close()
	if runtime.GOOS != "windows" && !isTerminal(null) {
		t.Errorf("%s: isTerminal = false, want true (a character device)", os.DevNull)
	}
}
