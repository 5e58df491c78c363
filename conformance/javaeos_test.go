//go:build conformance

package conformance

// Apache Kafka's Java consumer as the judge of exactly once: the
// kafka-clients 4.3.1 KafkaConsumer of conformance/java/eosreader reads an
// output topic read_committed (or read_uncommitted), and must see what the
// suite's own readers saw.

import (
	"bufio"
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/eostest"
)

// javaReadToEnd reads every partition of topic from its beginning to its
// end offsets with the Java consumer (EosReader), read_committed or
// read_uncommitted, and returns the values by partition, eostest's end
// marks left out. Read_committed ends at the last stable offset: call it
// when no transaction is open, as after an eostest.ReadToEnd that saw
// everything.
func javaReadToEnd(t *testing.T, ctx context.Context, addrs []string, topic string, committed bool) map[int32][]string {
	t.Helper()
	level := "read_uncommitted"
	if committed {
		level = "read_committed"
	}
	out := runJava(t, ctx, "eosreader", "EosReader", strings.Join(addrs, ","), topic, level)
	got := map[int32][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for line := 1; sc.Scan(); line++ {
		p, v, ok := strings.Cut(sc.Text(), "\t")
		part, err := strconv.ParseInt(p, 10, 32)
		if !ok || err != nil {
			t.Fatalf("EosReader %s %s: line %d: %.80q, want <partition>\\t<value>", topic, level, line, sc.Text())
		}
		if !strings.HasPrefix(v, "eostest-end-") {
			got[int32(part)] = append(got[int32(part)], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("EosReader %s %s: %v", topic, level, err)
	}
	return got
}

// checkJavaAgrees fails the test unless the Java consumer, read_committed,
// sees in topic exactly the values of want (the suite's read_committed
// read), partition by partition in the same order.
func checkJavaAgrees(t *testing.T, ctx context.Context, addrs []string, topic string, want map[int32][]string) {
	t.Helper()
	start := time.Now()
	got := javaReadToEnd(t, ctx, addrs, topic, true)
	took := time.Since(start)
	var parts []int32
	for p := range want {
		parts = append(parts, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	agree := true
	for _, p := range parts {
		g, w := got[p], want[p]
		if slices.Equal(g, w) {
			continue
		}
		agree = false
		i := 0
		for i < min(len(g), len(w)) && g[i] == w[i] {
			i++
		}
		t.Errorf("partition %d: the Java consumer read_committed read %d values, eostest.ReadToEnd %d; from index %d on, Java %q, Go %q",
			p, len(g), len(w), i, g[i:min(len(g), i+3)], w[i:min(len(w), i+3)])
	}
	if agree {
		t.Logf("the Java consumer (kafka-clients 4.3.1) read_committed read the same %d values, partition by partition in the same order (in %v)",
			eostest.Count(got), took.Round(time.Millisecond))
	}
}
