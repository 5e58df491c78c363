package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/iq"
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
		{"default balancer named", []string{"--partitions", "3", "KH01"}, "", exitOK,
			[]string{"balancer: murmur2 (Java's default partitioner, Kafka Streams, iq; kafka.Murmur2Balancer)\nkafka.Writer's default balancer, RoundRobin, ignores keys: it sends a key's records to every partition in turn\n\nkey"}, nil, nil},
		{"help", []string{"-h"}, "", exitOK, []string{"sticky partitioner", "not spread round-robin", "Kafka 2.4", "3.3",
			"--balancer B", "kafka.Hash: FNV-1a", "kafka.CRC32Balancer", "kafka.ReferenceHash", "RoundRobin, ignores keys", `"balancer": "<name>"`}, nil, nil},
		{"unknown balancer", []string{"--partitions", "3", "--balancer", "fnv", "k"}, "", exitUsage, nil,
			[]string{`azkafka partition: --balancer "fnv": want murmur2, hash, crc32 or reference` + "\nsee azkafka partition --help\n"}, nil},
		{"empty balancer", []string{"--partitions", "3", "--balancer=", "k"}, "", exitUsage, nil, []string{`--balancer "": want murmur2, hash, crc32 or reference`}, nil},
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
		Balancer   string                    `json:"balancer"`
		Partitions map[string]map[string]int `json:"partitions"`
		Moved      map[string]int            `json:"moved"`
		Load       map[string][]int          `json:"load"`
	}
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Balancer != "murmur2" {
		t.Errorf("balancer = %q, want murmur2 (the default)", doc.Balancer)
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

// kafkaGo returns where kafka-go's balancer b puts key among n partitions,
// called as kafka.Writer calls it: the message and the partitions 0..n-1.
func kafkaGo(b kafka.Balancer, key []byte, n int) int {
	ps := make([]int, n)
	for i := range ps {
		ps[i] = i
	}
	return b.Balance(kafka.Message{Key: key}, ps...)
}

// partitionJSON runs azkafka partition --json with args and decodes its
// output.
func partitionJSON(t *testing.T, args ...string) (balancer string, placed map[string]map[string]int) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append([]string{"partition", "--json"}, args...), strings.NewReader(""), &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %.300s", code, errb.String())
	}
	var doc struct {
		Balancer   string
		Partitions map[string]map[string]int
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Balancer, doc.Partitions
}

// TestPartitionBalancers: each --balancer, in any case, places "alice" on 3
// and 8 partitions where kafka-go's balancer does, and where it is known to
// land; the text output names the balancer and says RoundRobin ignores
// keys.
func TestPartitionBalancers(t *testing.T) {
	tests := []struct {
		flag, name string
		kafkaGo    kafka.Balancer
		on3, on8   int // known placements of "alice"
		header     string
	}{
		{"murmur2", "murmur2", kafka.Murmur2Balancer{}, 0, 5, "balancer: murmur2 (Java's default partitioner, Kafka Streams, iq; kafka.Murmur2Balancer)"},
		{"MURMUR2", "murmur2", kafka.Murmur2Balancer{}, 0, 5, "balancer: murmur2 ("},
		{"hash", "hash", &kafka.Hash{}, 2, 1, "balancer: hash (kafka.Hash: FNV-1a"},
		{"Hash", "hash", &kafka.Hash{}, 2, 1, "balancer: hash ("},
		{"crc32", "crc32", kafka.CRC32Balancer{}, 2, 7, "balancer: crc32 (kafka.CRC32Balancer: CRC-32, librdkafka's consistent_random)"},
		{"reference", "reference", &kafka.ReferenceHash{}, 0, 7, "balancer: reference (kafka.ReferenceHash: FNV-1a"},
		{"ReFeReNcE", "reference", &kafka.ReferenceHash{}, 0, 7, "balancer: reference ("},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			name, placed := partitionJSON(t, "--balancer", tt.flag, "--partitions", "3,8", "alice")
			if name != tt.name {
				t.Errorf(`"balancer" = %q, want %q`, name, tt.name)
			}
			for n, known := range map[int]int{3: tt.on3, 8: tt.on8} {
				got := placed[fmt.Sprint(n)]["alice"]
				if want := kafkaGo(tt.kafkaGo, []byte("alice"), n); got != want {
					t.Errorf("alice on %d partitions: %d, kafka-go's balancer says %d", n, got, want)
				}
				if got != known {
					t.Errorf("alice on %d partitions: %d, want %d", n, got, known)
				}
			}
			var out, errb bytes.Buffer
			if code := run([]string{"partition", "--balancer", tt.flag, "--partitions", "3,8", "alice"}, nil, &out, &errb); code != exitOK {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			rest := fmt.Sprintf("\n%s\n\nkey    3 partitions  8 partitions\nalice  %d             %d\n", roundRobinNote, tt.on3, tt.on8)
			if first, _, _ := strings.Cut(out.String(), "\n"); !strings.HasPrefix(first, tt.header) || !strings.Contains(out.String(), first+rest) {
				t.Errorf("text output:\n%s\nwant it to begin with %q, then:%s", out.String(), tt.header, rest)
			}
		})
	}
}

// TestPartitionBalancersAgreeWithKafkaGo: every key the command places, on
// every count and with every serde, lands where kafka-go's balancer puts
// the key's serialized bytes.
func TestPartitionBalancersAgreeWithKafkaGo(t *testing.T) {
	var keys, intKeys []string
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("user-%d", i*7919))
		intKeys = append(intKeys, fmt.Sprint(i*104729-10_000_000))
	}
	serdes := []struct {
		name string
		keys []string
		ser  func(string) []byte
	}{
		{"string", keys, func(k string) []byte { return []byte(k) }},
		{"int32", intKeys, func(k string) []byte {
			v, _ := strconv.ParseInt(k, 10, 32)
			return binary.BigEndian.AppendUint32(nil, uint32(v))
		}},
		{"int64", intKeys, func(k string) []byte {
			v, _ := strconv.ParseInt(k, 10, 64)
			return binary.BigEndian.AppendUint64(nil, uint64(v))
		}},
	}
	for _, b := range []struct {
		name string
		bal  kafka.Balancer
	}{{"murmur2", kafka.Murmur2Balancer{}}, {"hash", &kafka.Hash{}}, {"crc32", kafka.CRC32Balancer{}}, {"reference", &kafka.ReferenceHash{}}} {
		for _, sd := range serdes {
			t.Run(b.name+"/"+sd.name, func(t *testing.T) {
				_, placed := partitionJSON(t, "--balancer", b.name, "--key-serde", sd.name, "--partitions", "1,3,7,8,100", "--", strings.Join(sd.keys, ","))
				differ := 0
				for _, n := range []int{1, 3, 7, 8, 100} {
					for _, k := range sd.keys {
						got, want := placed[fmt.Sprint(n)][k], kafkaGo(b.bal, sd.ser(k), n)
						if got != want {
							t.Errorf("%s on %d partitions: %d, kafka-go says %d", k, n, got, want)
						}
						if b.name != "murmur2" && got != kafkaGo(kafka.Murmur2Balancer{}, sd.ser(k), n) {
							differ++
						}
					}
				}
				if b.name != "murmur2" && differ == 0 {
					t.Errorf("--balancer %s places every key as murmur2 does", b.name)
				}
			})
		}
	}
}

// TestMurmur2MatchesKafkaGo: iq.Partition, which --balancer murmur2
// places keys with, and kafka.Murmur2Balancer agree on random keys of every
// length up to 64 bytes (all of murmur2's tails), empty included, and on
// partition counts up to 1000.
func TestMurmur2MatchesKafkaGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		key := make([]byte, i%65)
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		n := 1 + rng.IntN(1000)
		if got, want := iq.Partition(key, n), kafkaGo(kafka.Murmur2Balancer{}, key, n); got != want {
			t.Fatalf("key %x on %d partitions: iq.Partition %d, kafka.Murmur2Balancer %d", key, n, got, want)
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
