package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/iq"
)

const partitionUsage = `Usage: azkafka partition --partitions N[,N...] [--balancer B] [--keys-file FILE] [--key-serde S] [--json] [KEY...]

The partition lab: shows where keys land on a topic's partitions and what
moves when it grows. By default it places each serialized key with Kafka's
default partitioner for keyed records, toPositive(murmur2(key)) % partitions,
exactly as Java's producer (BuiltInPartitioner), Kafka Streams and iq
compute it, and as kafka-go's kafka.Murmur2Balancer does; --balancer picks
another of kafka-go's keyed balancers. kafka.Writer's default balancer,
RoundRobin, ignores keys: it sends a key's records to every partition in
turn, so a Writer that needs a key's records together sets Balancer.

Keys come from the arguments, else from --keys-file, else from standard
input (on a terminal, after a line on stderr saying so; Ctrl-D ends the
keys); one per line or comma-separated. Empty keys are skipped; a key given
twice counts once. Put -- before keys that start with "-".

For each partition count it prints the balancer, where each key lands and
the load per partition with its skew (the fullest partition against the
ideal keys/partitions, and the empty partitions); for each pair of
consecutive counts, how many and which keys move. Growing a topic moves
keys, and so does changing its balancer: records of one key written before
and after land on different partitions, so their order is lost and a Kafka
Streams store sees the key on a new task.

Null keys are placed by none of these formulas. kafka.Hash sends them
round-robin, kafka-go's other balancers each to a random partition. In
Java's producer they are not spread round-robin: since Kafka 2.4 (KIP-480)
the sticky partitioner, the default since 3.3 (KIP-794, built into the
producer), sends every keyless record of a batch to one partition and
switches partition when the batch is full, so load evens out over batches,
not records.

Flags:
  --partitions N,...  partition counts to compare, e.g. 3,6,8 (required)
  --balancer B        how keys are placed, in any case (default murmur2):
                        murmur2    toPositive(murmur2(key)) % n: Java's
                                   default partitioner, Kafka Streams, iq;
                                   kafka.Murmur2Balancer
                        hash       kafka.Hash: FNV-1a, |int32(h) % n|, as
                                   Sarama's hash partitioner
                        crc32      kafka.CRC32Balancer: CRC-32 (IEEE) % n,
                                   librdkafka's consistent_random (the
                                   default of confluent-kafka-go)
                        reference  kafka.ReferenceHash: FNV-1a,
                                   (h & 0x7fffffff) % n, as Sarama's
                                   reference hash partitioner
  --keys-file FILE    read keys from FILE ("-" is standard input)
  --key-serde S       the key bytes, for every balancer: string (UTF-8,
                      Java's StringSerializer; default), int32 (4 bytes
                      big-endian, IntegerSerializer) or int64 (8 bytes
                      big-endian, LongSerializer)
  --json              print {"balancer": "<name>", "partitions": {"<n>":
                      {"<key>": p}}, "moved": {"<a>-><b>": count}, "load":
                      {"<n>": [count per partition]}}; "moved" covers every
                      ordered pair of the given counts

Exit status: 0 success, 2 usage error (bad flag, balancer, count or key).
`

// keyBalancer is a way of placing a serialized key on one of a topic's
// partitions that --balancer names.
type keyBalancer struct {
	name    string
	about   string         // the text output's header, after the name
	balance kafka.Balancer // called with the partitions 0..n-1
}

// keyBalancers are the values of --balancer, the default first. murmur2 is
// iq's Partition, the function iq routes with (kafka.Murmur2Balancer agrees
// with it); the others are kafka-go's own balancers, zero values: for the
// non-empty keys the lab places, CRC32Balancer's Consistent (false by
// default) changes nothing.
var keyBalancers = []keyBalancer{
	{"murmur2", "Java's default partitioner, Kafka Streams, iq; kafka.Murmur2Balancer",
		kafka.BalancerFunc(func(m kafka.Message, ps ...int) int { return iq.Partition(m.Key, len(ps)) })},
	{"hash", "kafka.Hash: FNV-1a, as Sarama's hash partitioner", &kafka.Hash{}},
	{"crc32", "kafka.CRC32Balancer: CRC-32, librdkafka's consistent_random", kafka.CRC32Balancer{}},
	{"reference", "kafka.ReferenceHash: FNV-1a, as Sarama's reference hash partitioner", &kafka.ReferenceHash{}},
}

// roundRobinNote is the text output's second line.
const roundRobinNote = "kafka.Writer's default balancer, RoundRobin, ignores keys: it sends a key's records to every partition in turn"

// lookupBalancer returns the balancer named name, in any case.
func lookupBalancer(name string) (keyBalancer, error) {
	var names []string
	for _, b := range keyBalancers {
		if strings.EqualFold(b.name, name) {
			return b, nil
		}
		names = append(names, b.name)
	}
	return keyBalancer{}, fmt.Errorf("--balancer %s: want %s or %s", strconv.Quote(name), strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

func runPartition(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("partition", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	countsFlag := flags.String("partitions", "", "")
	balancerFlag := flags.String("balancer", keyBalancers[0].name, "")
	keysFile := flags.String("keys-file", "", "")
	serde := flags.String("key-serde", "string", "")
	asJSON := flags.Bool("json", false, "")
	rest, err := parseInterleaved(flags, args)
	if err == flag.ErrHelp {
		fmt.Fprint(stdout, partitionUsage)
		return exitOK
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "azkafka partition: "+format+"\n", a...)
		return exitUsage
	}
	if err != nil {
		return failUsage(stderr, "partition", "partition", "%s", flagError(flags, err))
	}
	counts, err := parseCounts(*countsFlag)
	if err != nil {
		return failUsage(stderr, "partition", "partition", "%v", err)
	}
	balancer, err := lookupBalancer(*balancerFlag)
	if err != nil {
		return failUsage(stderr, "partition", "partition", "%v", err)
	}
	var keys []string
	switch {
	case len(rest) > 0:
		keys = splitKeys(strings.Join(rest, "\n"))
	case *keysFile != "" && *keysFile != "-":
		b, err := os.ReadFile(*keysFile)
		if err != nil {
			return fail("--keys-file: %v", err)
		}
		keys = splitKeys(string(b))
	default:
		if isTerminal(stdin) {
			fmt.Fprintf(stderr, "azkafka partition: reading keys from standard input (one per line or comma-separated; %s to end)...\n", endOfInput)
		}
		b, err := io.ReadAll(bufio.NewReader(stdin))
		if err != nil {
			return fail("reading keys from standard input: %v", err)
		}
		keys = splitKeys(string(b))
	}
	if len(keys) == 0 {
		return failUsage(stderr, "partition", "partition", "no keys: give them as arguments, with --keys-file, or on standard input")
	}
	serialized := make([][]byte, len(keys))
	for i, k := range keys {
		if serialized[i], err = serializeKey(*serde, k); err != nil {
			return failUsage(stderr, "partition", "partition", "%v", err)
		}
	}

	lab := partitionLab{balancer: balancer, keys: keys, counts: counts, placed: map[int][]int{}}
	for _, n := range counts {
		partitions := make([]int, n)
		for p := range partitions {
			partitions[p] = p
		}
		placed := make([]int, len(keys))
		for i, b := range serialized {
			placed[i] = balancer.balance.Balance(kafka.Message{Key: b}, partitions...)
		}
		lab.placed[n] = placed
	}
	if *asJSON {
		return lab.printJSON(stdout, stderr)
	}
	lab.printText(stdout)
	return exitOK
}

// isTerminal reports whether r is a terminal, where a command reading it
// says so before it waits: a character device (so /dev/null too, where
// the line is harmless). Tests replace it.
var isTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// endOfInput is the key that ends a terminal's input.
var endOfInput = map[bool]string{false: "Ctrl-D", true: "Ctrl-Z then Enter"}[runtime.GOOS == "windows"]

// parseInterleaved parses flags that may come before or after positional
// arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		if args[0] == "--" {
			return append(rest, args[1:]...), nil
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

func parseCounts(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("--partitions is required, e.g. --partitions 3,6,8")
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > 1<<16 {
			return nil, fmt.Errorf("--partitions %s: %s is not a partition count in 1..65536", strconv.Quote(s), strconv.Quote(strings.TrimSpace(f)))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// splitKeys splits on newlines and commas, trims spaces and \r, drops empty
// keys and duplicates (first occurrence kept).
func splitKeys(s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(s, "\n") {
		for _, k := range strings.Split(line, ",") {
			k = strings.TrimSpace(k)
			if k == "" || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

func serializeKey(serde, k string) ([]byte, error) {
	switch serde {
	case "string":
		return []byte(k), nil // StringSerializer: UTF-8
	case "int32":
		v, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("key %s: not an int32 (--key-serde int32)", strconv.Quote(k))
		}
		return binary.BigEndian.AppendUint32(nil, uint32(int32(v))), nil // IntegerSerializer
	case "int64":
		v, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("key %s: not an int64 (--key-serde int64)", strconv.Quote(k))
		}
		return binary.BigEndian.AppendUint64(nil, uint64(v)), nil // LongSerializer
	}
	return nil, fmt.Errorf("--key-serde %s: want string, int32 or int64", strconv.Quote(serde))
}

type partitionLab struct {
	balancer keyBalancer
	keys     []string
	counts   []int
	placed   map[int][]int // count -> partition of keys[i]
}

func (l partitionLab) load(n int) []int {
	out := make([]int, n)
	for _, p := range l.placed[n] {
		out[p]++
	}
	return out
}

func (l partitionLab) moved(a, b int) []string {
	var out []string
	for i, k := range l.keys {
		if l.placed[a][i] != l.placed[b][i] {
			out = append(out, k)
		}
	}
	return out
}

func (l partitionLab) printJSON(stdout, stderr io.Writer) int {
	doc := struct {
		Balancer   string                    `json:"balancer"`
		Partitions map[string]map[string]int `json:"partitions"`
		Moved      map[string]int            `json:"moved"`
		Load       map[string][]int          `json:"load"`
	}{l.balancer.name, map[string]map[string]int{}, map[string]int{}, map[string][]int{}}
	for _, n := range l.counts {
		m := map[string]int{}
		for i, k := range l.keys {
			m[k] = l.placed[n][i]
		}
		doc.Partitions[strconv.Itoa(n)] = m
		doc.Load[strconv.Itoa(n)] = l.load(n)
		for _, b := range l.counts {
			if b != n {
				doc.Moved[fmt.Sprintf("%d->%d", n, b)] = len(l.moved(n, b))
			}
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false) // keep "3->6" readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintf(stderr, "azkafka partition: %v\n", err)
		return exitFail
	}
	return exitOK
}

func (l partitionLab) printText(w io.Writer) {
	fmt.Fprintf(w, "balancer: %s (%s)\n%s\n\n", l.balancer.name, l.balancer.about, roundRobinNote)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "key")
	for _, n := range l.counts {
		fmt.Fprintf(tw, "\t%d partitions", n)
	}
	fmt.Fprintln(tw)
	for i, k := range l.keys {
		fmt.Fprint(tw, k)
		for _, n := range l.counts {
			fmt.Fprintf(tw, "\t%d", l.placed[n][i])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for i := 1; i < len(l.counts); i++ {
		a, b := l.counts[i-1], l.counts[i]
		mv := l.moved(a, b)
		fmt.Fprintf(w, "%d -> %d partitions: %d of %d keys move", a, b, len(mv), len(l.keys))
		if len(mv) > 0 {
			const show = 20
			list := strings.Join(mv[:min(len(mv), show)], ", ")
			if len(mv) > show {
				list += fmt.Sprintf(", ... (%d more)", len(mv)-show)
			}
			fmt.Fprintf(w, ": %s", list)
		}
		fmt.Fprintln(w)
	}
	if len(l.counts) > 1 {
		fmt.Fprintln(w)
	}
	for _, n := range l.counts {
		load := l.load(n)
		mx, empty := 0, 0
		for _, c := range load {
			mx = max(mx, c)
			if c == 0 {
				empty++
			}
		}
		ideal := float64(len(l.keys)) / float64(n)
		fmt.Fprintf(w, "%d partitions: load %v; max %d vs ideal %.2f (skew %.2fx); %d empty\n",
			n, load, mx, ideal, float64(mx)/ideal, empty)
	}
}
