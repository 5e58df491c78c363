//go:build conformance

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azkafka/azkafka/iq"
	"github.com/segmentio/kafka-go"
)

// maxPartitions is the largest partition count cross-checked; every count
// from 1 to maxPartitions is checked for every key.
const maxPartitions = 64

// partitionKeyCount is how many keys partitionKeys generates.
const partitionKeyCount = 10_000

// partitioners are the Go functions that must pick the same partition for a
// key as the Java producer (BuiltInPartitioner.partitionForKey). Each gets the
// serialized key and the partition count n, and returns a partition in [0, n).
var partitioners = map[string]func(key []byte, n int) int{
	"kafka-go Murmur2Balancer{Consistent: true}": murmur2Balancer,
	"iq.Partition": iq.Partition,
}

// partitionLists[n] is [0, 1, ..., n-1], the partitions a kafka-go Balancer
// is offered for a topic with n partitions.
var partitionLists = func() [][]int {
	lists := make([][]int, maxPartitions+1)
	for n := 1; n <= maxPartitions; n++ {
		lists[n] = make([]int, n)
		for i := range lists[n] {
			lists[n][i] = i
		}
	}
	return lists
}()

func murmur2Balancer(key []byte, n int) int {
	return kafka.Murmur2Balancer{Consistent: true}.Balance(kafka.Message{Key: key}, partitionLists[n]...)
}

// TestPartitionerMatchesJava checks that every function in partitioners picks
// the partition kafka-clients 4.3.1 picks, for partitionKeyCount keys and every
// partition count 1..maxPartitions.
func TestPartitionerMatchesJava(t *testing.T) {
	keys := partitionKeys(partitionKeyCount, 0x617a6b61666b61, 2) // fixed seed: the same keys every run
	if len(keys) != partitionKeyCount {
		t.Fatalf("generated %d keys, want %d", len(keys), partitionKeyCount)
	}
	keysFile := filepath.Join(t.TempDir(), "keys.hex")
	var buf bytes.Buffer
	for _, k := range keys {
		buf.WriteString(hex.EncodeToString(k))
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(keysFile, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	out := runJava(t, ctx, "partitioner", "PartitionForKey", keysFile, strconv.Itoa(maxPartitions))
	t.Logf("java PartitionForKey: %d keys x %d partition counts in %v", len(keys), maxPartitions, time.Since(start).Round(time.Millisecond))
	want := parseJavaPartitions(t, out, len(keys))

	for name, partition := range partitioners {
		t.Run(name, func(t *testing.T) {
			const show = 10
			checked, mismatches := 0, 0
			for i, key := range keys {
				for n := 1; n <= maxPartitions; n++ {
					checked++
					got := partition(key, n)
					if got == want[i][n-1] {
						continue
					}
					mismatches++
					if mismatches <= show {
						t.Errorf("key %d (%d bytes) %s, n=%d: Go %d, Java %d", i, len(key), keyHex(key), n, got, want[i][n-1])
					}
				}
			}
			if mismatches > show {
				t.Errorf("... %d mismatches in all, first %d shown", mismatches, show)
			}
			t.Logf("%s: %d key x partition-count pairs cross-checked with Java, %d mismatches", name, checked, mismatches)
		})
	}
}

// parseJavaPartitions parses PartitionForKey's output: one line per key, each
// with maxPartitions partitions for n = 1..maxPartitions.
func parseJavaPartitions(t *testing.T, out []byte, keys int) [][]int {
	t.Helper()
	want := make([][]int, 0, keys)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != maxPartitions {
			t.Fatalf("java output line %d has %d fields, want %d: %.80q", len(want)+1, len(fields), maxPartitions, sc.Text())
		}
		row := make([]int, maxPartitions)
		for j, f := range fields {
			p, err := strconv.Atoi(f)
			if err != nil || p < 0 || p > j {
				t.Fatalf("java output line %d field %d = %q: not a partition of %d", len(want)+1, j+1, f, j+1)
			}
			row[j] = p
		}
		want = append(want, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want) != keys {
		t.Fatalf("java printed %d lines for %d keys", len(want), keys)
	}
	return want
}

// partitionKeys returns count keys: the hand-picked edge cases first, then
// random keys from a PCG seeded with seed1, seed2 until count is reached.
func partitionKeys(count int, seed1, seed2 uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed1, seed2))
	var keys [][]byte
	add := func(k []byte) { keys = append(keys, k) }

	// The empty key (serialized "" rather than a null key).
	add([]byte{})
	// Every 1-byte key: murmur2's 1-byte tail, Java's signed bytes.
	for b := range 256 {
		add([]byte{byte(b)})
	}
	// 2- and 3-byte keys from the bytes where signedness and carries differ.
	edge := []byte{0x00, 0x01, 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0xff}
	for _, a := range edge {
		for _, b := range edge {
			add([]byte{a, b})
			for _, c := range edge {
				add([]byte{a, b, c})
			}
		}
	}
	// Lengths 4..33 of constant bytes: whole 4-byte blocks plus every tail length.
	for _, b := range []byte{0x00, 0x7f, 0x80, 0xff} {
		for n := 4; n <= 33; n++ {
			add(bytes.Repeat([]byte{b}, n))
		}
	}
	// Text: ASCII, non-ASCII UTF-8 of 2, 3 and 4 bytes per rune, combining marks.
	for _, s := range []string{
		"a", "key", "user-1", "order:12345", " ", "\t\n", "0", "-1",
		"é", "ß", "Ω", "ключ", "日本語", "키", "🙂", "👩‍💻", "e\u0301", "\u00a0", "\u200b", "\ufeff",
		"zürich-1a", "eu-west-1a", "us-east-1b", "\U0010ffff",
	} {
		add([]byte(s))
	}
	// Invalid UTF-8: lone continuation and lead bytes, overlong forms,
	// surrogates, truncated sequences, bytes never valid in UTF-8.
	for _, k := range [][]byte{
		{0x80}, {0xbf}, {0xc0, 0x80}, {0xc0, 0xaf}, {0xc3}, {0xc3, 0x28}, {0xe2, 0x82},
		{0xed, 0xa0, 0x80}, {0xed, 0xbf, 0xbf}, {0xf0, 0x9f, 0x99}, {0xf4, 0x90, 0x80, 0x80},
		{0xf8, 0x88, 0x80, 0x80, 0x80}, {0xfe, 0xff}, {0xff, 0xfe, 0x00, 0x00}, {'a', 0xff, 'b'},
	} {
		add(k)
	}
	// Long keys of several KiB around block and power-of-two boundaries.
	for _, n := range []int{255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097, 8191, 8192, 8193, 16 << 10, 64<<10 + 3} {
		add(randomBytes(rng, n))
	}
	// Numeric-looking keys as applications often use them.
	for i := range 200 {
		add([]byte(strconv.Itoa(i * 7919)))
	}
	// Random keys: mostly short, some up to 512 bytes.
	for len(keys) < count {
		n := rng.IntN(33)
		if rng.IntN(10) == 0 {
			n = rng.IntN(513)
		}
		add(randomBytes(rng, n))
	}
	return keys[:count]
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// keyHex shows a key in hex, cut after 32 bytes.
func keyHex(k []byte) string {
	if len(k) == 0 {
		return `""`
	}
	if len(k) > 32 {
		return fmt.Sprintf("%x...", k[:32])
	}
	return fmt.Sprintf("%x", k)
}
