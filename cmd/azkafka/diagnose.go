package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

const diagnoseUsage = `Usage: azkafka diagnose --bootstrap host:port[,host:port...] [--json] [--topic name] [--timeout 10s]
                        [--tls] [--tls-ca FILE] [--sasl-mechanism M --sasl-user U]

Connects to the cluster as an SDK client of this process would (same
client ID, AZ and connection policy, from the same AZKAFKA_* environment)
and prints: the client ID and the AZ; every broker with its rack, whether
it is in the client's zone and the round-trip time of an ApiVersions
request (the best of 3, after the connection is open); for each topic
(all non-internal topics, or the one --topic names), how many partition
leaders are in the client's zone; and what the SDK would do: the interzone flag,
rack-aware partitioning of keyless messages (AZKAFKA_RACK_AWARE_PARTITIONING)
and what sdk.ZoneAffinityGroupBalancer would give a member in this zone
(advice that applies to several topics is one line naming how many).

A broker's zone is its rack (broker.rack); on MSK racks are zone IDs, so
run with AZKAFKA_AZ_FORMAT=id.

TLS and SASL:
` + securityUsage + `
With --json, prints one object: {"client_id", "az", "az_source",
"interzone_lb", "rack_aware_partitioning", "brokers": [{"id", "addr",
"rack", "in_zone", "rtt_ms"}], "topics": [{"name", "partitions",
"leaders_in_zone", "partitions_in_zone", "keyless_partitions"}], "advice": [...],
"brokers_omitted", "topics_omitted"}: at most 1000 brokers are probed and
listed, and 1000 topics (the counts of the others are given); the output
stops at 1 MiB.

--timeout bounds the whole run: past it (and half a second of grace for a
step that does not stop at once) diagnose gives up with status 1.

Exit status: 0 printed, 1 the cluster could not be reached or has no topic
--topic (it says "topic X not found on BOOTSTRAP"), 2 usage or
configuration error.
`

type diagnoseBroker struct {
	ID     int     `json:"id"`
	Addr   string  `json:"addr"`
	Rack   string  `json:"rack"`
	InZone bool    `json:"in_zone"`
	RTTms  float64 `json:"rtt_ms"` // -1: no answer
}

type diagnoseTopic struct {
	Name          string `json:"name"`
	Partitions    int    `json:"partitions"`
	LeadersInZone int    `json:"leaders_in_zone"`
	InZone        []int  `json:"partitions_in_zone"`
	// KeylessPartitions are the partitions an sdk.Writer of this process
	// would send keyless messages to.
	KeylessPartitions []int `json:"keyless_partitions"`
}

type diagnoseOutput struct {
	ClientID    string           `json:"client_id"`
	AZ          string           `json:"az"`
	AZSource    string           `json:"az_source"`
	InterzoneLB bool             `json:"interzone_lb"`
	RackAware   bool             `json:"rack_aware_partitioning"`
	Brokers     []diagnoseBroker `json:"brokers"`
	Topics      []diagnoseTopic  `json:"topics"`
	Advice      []string         `json:"advice"`
	// BrokersOmitted and TopicsOmitted count what is past the first
	// maxListed.
	BrokersOmitted int `json:"brokers_omitted,omitempty"`
	TopicsOmitted  int `json:"topics_omitted,omitempty"`
}

// runDiagnose runs `azkafka diagnose`.
func runDiagnose(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f, code := parseDiagnose(args, stdout, stderr)
	if f == nil {
		return code
	}

	opts := []sdk.Option{sdk.WithGetenv(clientIDGetenv), sdk.WithLogger(slog.New(slog.DiscardHandler))}
	if clientIDDetect != nil {
		opts = append(opts, sdk.WithDetector(clientIDDetect))
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	id, tr, ok := diagnoseClient(ctx, &f.sec, opts, stderr)
	if !ok {
		return exitUsage
	}
	defer tr.CloseIdleConnections()
	res, ok := awaitCluster(ctx, tr, f.addrs, f.topic, id)
	if !ok {
		fmt.Fprintf(stderr, "azkafka diagnose: no complete answer from %s within --timeout=%v\n", strings.Join(f.addrs, ","), f.timeout)
		return exitFail
	}
	if !reportCluster(stderr, res, f.addrs, f.topic) {
		return exitFail
	}
	return writeDiagnose(stdout, stderr, res.out, f.asJSON)
}

// diagnoseFlags is the command line of `azkafka diagnose`.
type diagnoseFlags struct {
	addrs   []string // of --bootstrap
	asJSON  bool
	topic   string
	timeout time.Duration
	sec     securityFlags
}

// parseDiagnose parses the command line of `azkafka diagnose`. On --help
// or a usage error it prints and returns nil and the exit status.
func parseDiagnose(args []string, stdout, stderr io.Writer) (*diagnoseFlags, int) {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(stdout, diagnoseUsage)
			return nil, exitOK
		}
	}
	f := &diagnoseFlags{}
	flags := flag.NewFlagSet("diagnose", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	bootstrap := flags.String("bootstrap", "", "host:port[,host:port...] of the cluster")
	flags.BoolVar(&f.asJSON, "json", false, "print JSON")
	flags.StringVar(&f.topic, "topic", "", "only this topic")
	flags.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound on the whole run")
	f.sec.register(flags)
	if err := flags.Parse(args); err != nil {
		return nil, failUsage(stderr, "diagnose", "diagnose", "%s", flagError(flags, err))
	}
	if flags.NArg() > 0 {
		return nil, failUsage(stderr, "diagnose", "diagnose", "unexpected argument %q", flags.Arg(0))
	}
	for a := range strings.SplitSeq(*bootstrap, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, failUsage(stderr, "diagnose", "diagnose", "--bootstrap=%q: %q is not host:port", *bootstrap, a)
		}
		f.addrs = append(f.addrs, a)
	}
	if len(f.addrs) == 0 {
		return nil, failUsage(stderr, "diagnose", "diagnose", "--bootstrap is required, e.g. --bootstrap broker-1:9092")
	}
	if f.timeout <= 0 {
		return nil, failUsage(stderr, "diagnose", "diagnose", "--timeout=%v: must be > 0", f.timeout)
	}
	return f, exitOK
}

// diagnoseClient resolves the SDK identity of this process and builds the
// transport an SDK client would use, with the TLS and SASL of sec. On a
// configuration error it prints it and returns ok=false.
func diagnoseClient(ctx context.Context, sec *securityFlags, opts []sdk.Option, stderr io.Writer) (id sdk.Identity, tr *kafka.Transport, ok bool) {
	id, err := sdk.ResolveIdentity(ctx, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "azkafka diagnose: invalid configuration: %v\n", err)
		return id, nil, false
	}
	base, err := sec.transport()
	if err != nil {
		fmt.Fprintf(stderr, "azkafka diagnose: %v\n", err)
		return id, nil, false
	}
	tr, err = sdk.NewTransport(base, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "azkafka diagnose: invalid configuration: %v\n", err)
		return id, nil, false
	}
	return id, tr, true
}

// awaitCluster runs diagnoseCluster; ok is false when it has not returned
// by diagnoseGrace past ctx's deadline.
func awaitCluster(ctx context.Context, tr *kafka.Transport, addrs []string, topic string, id sdk.Identity) (res diagnoseResult, ok bool) {
	// kafka-go does not stop every step at the context's deadline: the
	// run waits for it at most a grace period past --timeout.
	done := make(chan diagnoseResult, 1)
	go func() { done <- diagnoseCluster(ctx, tr, addrs, topic, id) }()
	select {
	case res = <-done:
		return res, true
	case <-time.After(time.Until(deadline(ctx)) + diagnoseGrace):
		return res, false
	}
}

// reportCluster prints the error of res, if any, and reports whether res
// has none.
func reportCluster(stderr io.Writer, res diagnoseResult, addrs []string, topic string) bool {
	if res.err != nil {
		fmt.Fprintf(stderr, "azkafka diagnose: no metadata from %s: %v (%s)\n", strings.Join(addrs, ","), res.err, refusalHint(res.err))
		return false
	}
	if res.topicErr != nil {
		if errors.Is(res.topicErr, kafka.UnknownTopicOrPartition) {
			fmt.Fprintf(stderr, "azkafka diagnose: topic %q not found on %s\n", topic, strings.Join(addrs, ","))
		} else {
			fmt.Fprintf(stderr, "azkafka diagnose: topic %q on %s: %v (%s)\n", topic, strings.Join(addrs, ","), res.topicErr, refusalHint(res.topicErr))
		}
		return false
	}
	return true
}

// writeDiagnose prints out to stdout, as JSON or as text, cut at
// maxDiagnoseOutput, and returns the exit status.
func writeDiagnose(stdout, stderr io.Writer, out diagnoseOutput, asJSON bool) int {
	stdout = &capWriter{w: stdout, left: maxDiagnoseOutput}

	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "azkafka diagnose: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	printDiagnose(stdout, out)
	return exitOK
}

// printDiagnose prints out as text.
func printDiagnose(w io.Writer, out diagnoseOutput) {
	az := out.AZ
	if az == "" {
		az = "unknown"
	}
	fmt.Fprintf(w, "client ID  %s\nAZ         %s (%s)\n\nbrokers:\n", out.ClientID, az, out.AZSource)
	for _, b := range out.Brokers {
		rtt := "no answer"
		if b.RTTms >= 0 {
			rtt = fmt.Sprintf("%.2f ms", b.RTTms)
		}
		fmt.Fprintf(w, "  %-4d %-24s rack %-12q in zone %-5v rtt %s\n", b.ID, b.Addr, b.Rack, b.InZone, rtt)
	}
	if out.BrokersOmitted > 0 {
		fmt.Fprintf(w, "  ... and %d more brokers\n", out.BrokersOmitted)
	}
	fmt.Fprintln(w, "\ntopics (partition leaders in the client's zone):")
	for _, t := range out.Topics {
		fmt.Fprintf(w, "  %-30s %d of %d %v\n", t.Name, t.LeadersInZone, t.Partitions, t.InZone)
	}
	if out.TopicsOmitted > 0 {
		fmt.Fprintf(w, "  ... and %d more topics (use --topic NAME)\n", out.TopicsOmitted)
	}
	fmt.Fprintln(w, "\nthe SDK would:")
	for _, a := range out.Advice {
		fmt.Fprintf(w, "  - %s\n", a)
	}
}

// brokerRTT is the best of 3 ApiVersions round trips to addr, in ms, after
// a first one that opens the connection; -1 when it does not answer.
func brokerRTT(ctx context.Context, cl *kafka.Client, addr string) float64 {
	if _, err := cl.ApiVersions(ctx, &kafka.ApiVersionsRequest{Addr: kafka.TCP(addr)}); err != nil {
		return -1
	}
	best := time.Duration(-1)
	for range 3 {
		start := time.Now()
		if _, err := cl.ApiVersions(ctx, &kafka.ApiVersionsRequest{Addr: kafka.TCP(addr)}); err != nil {
			return -1
		}
		if d := time.Since(start); best < 0 || d < best {
			best = d
		}
	}
	return float64(best.Microseconds()) / 1000
}

// diagnoseAdvice says what the SDK would do with this cluster.
func diagnoseAdvice(out diagnoseOutput, racks int) []string {
	var a []string
	if out.InterzoneLB {
		a = append(a, "send warpstream_interzone_lb=true (WarpStream agents close connections from other zones; Apache Kafka ignores it)")
	} else {
		a = append(a, "not ask for interzone load balancing (AZKAFKA_INTERZONE_LB=false)")
	}
	switch {
	case out.AZ == "":
		a = append(a, "not know its zone: set AZKAFKA_AZ, or see azkafka detect; without it nothing below can stay in-zone")
	case racks == 0:
		a = append(a, "find no broker rack: set broker.rack on the brokers for rack-aware partitioning and zone-aware assignment to work")
	}
	localBrokers := 0
	for _, b := range out.Brokers {
		if b.InZone {
			localBrokers++
		}
	}
	if out.AZ != "" && racks > 0 && localBrokers == 0 {
		a = append(a, fmt.Sprintf("find no broker with rack %q: compare the racks above with the AZ (on MSK set AZKAFKA_AZ_FORMAT=id)", out.AZ))
	}
	return append(a, topicAdvice(out)...)
}

// topicAdvice says what the SDK would do with each topic. Advice that
// applies to several topics is one line naming how many (and the first
// few): their partition counts are in the topic list.
func topicAdvice(out diagnoseOutput) []string {
	type piece struct {
		one    func(t diagnoseTopic) string // for a single topic
		many   string                       // for several, after "N topics (names): "
		topics []diagnoseTopic
	}
	offNone := &piece{one: func(t diagnoseTopic) string {
		return fmt.Sprintf("spread keyless messages over all %d partitions (rack-aware partitioning off, and no partition led in-zone)", t.Partitions)
	}, many: "spread keyless messages over all their partitions (rack-aware partitioning off, and no partition led in-zone)"}
	off := &piece{one: func(t diagnoseTopic) string {
		return fmt.Sprintf("spread keyless messages over all %d partitions (rack-aware partitioning off; AZKAFKA_RACK_AWARE_PARTITIONING=true would use the %d led in-zone)", t.Partitions, t.LeadersInZone)
	}, many: "spread keyless messages over all their partitions (rack-aware partitioning off; AZKAFKA_RACK_AWARE_PARTITIONING=true would use those led in-zone, counted above)"}
	none := &piece{one: func(t diagnoseTopic) string {
		return fmt.Sprintf("spread keyless messages over all %d partitions (no leader in-zone)", t.Partitions)
	}, many: "spread keyless messages over all their partitions (no leader in-zone)"}
	local := &piece{one: func(t diagnoseTopic) string {
		return fmt.Sprintf("send keyless messages to the %d partitions led in-zone %v; keyed messages keep their partition", t.LeadersInZone, t.InZone)
	}, many: "send keyless messages to the partitions led in-zone (listed above); keyed messages keep their partition"}
	group := &piece{one: func(t diagnoseTopic) string {
		return fmt.Sprintf("with sdk.ZoneAffinityGroupBalancer, give consumers in this zone the %d partitions led here first, as far as balance allows", t.LeadersInZone)
	}, many: "with sdk.ZoneAffinityGroupBalancer, give consumers in this zone the partitions led here first, as far as balance allows"}
	for _, t := range out.Topics {
		p := local
		switch {
		case !out.RackAware && t.LeadersInZone == 0:
			p = offNone
		case !out.RackAware:
			p = off
		case t.LeadersInZone == 0:
			p = none
		}
		p.topics = append(p.topics, t)
		if t.LeadersInZone > 0 {
			group.topics = append(group.topics, t)
		}
	}
	var a []string
	for _, p := range []*piece{offNone, off, none, local, group} {
		switch n := len(p.topics); {
		case n == 1:
			a = append(a, fmt.Sprintf("topic %s: %s", p.topics[0].Name, p.one(p.topics[0])))
		case n > 1:
			a = append(a, fmt.Sprintf("%d topics (%s): %s", n, topicNames(p.topics), p.many))
		}
	}
	return a
}

// topicNames names the first 3 topics of ts, then "..." for the others.
func topicNames(ts []diagnoseTopic) string {
	const show = 3
	names := make([]string, 0, show+1)
	for _, t := range ts[:min(len(ts), show)] {
		names = append(names, t.Name)
	}
	if len(ts) > show {
		names = append(names, "...")
	}
	return strings.Join(names, ", ")
}

// diagnoseGrace is how long past --timeout the run waits for the cluster
// part to return before it gives up.
const diagnoseGrace = 500 * time.Millisecond

// maxDiagnoseOutput caps what diagnose prints: 1 MiB.
const maxDiagnoseOutput = 1 << 20

// maxListed caps the brokers probed and printed, and the topics printed.
const maxListed = 1000

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

type diagnoseResult struct {
	out diagnoseOutput
	err error
	// topicErr is the error of the topic named by --topic (for one the
	// cluster does not have, kafka.UnknownTopicOrPartition).
	topicErr error
}

// diagnoseCluster reads the cluster's metadata through tr and measures
// each broker's round trip.
func diagnoseCluster(ctx context.Context, tr *kafka.Transport, addrs []string, topic string, id sdk.Identity) diagnoseResult {
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Transport: tr}
	req := &kafka.MetadataRequest{}
	if topic != "" {
		req.Topics = []string{topic}
	}
	md, err := cl.Metadata(ctx, req)
	if err != nil {
		return diagnoseResult{err: err}
	}
	if topic != "" {
		i := slices.IndexFunc(md.Topics, func(t kafka.Topic) bool { return t.Name == topic })
		switch {
		case i < 0:
			return diagnoseResult{topicErr: kafka.UnknownTopicOrPartition}
		case md.Topics[i].Error != nil:
			return diagnoseResult{topicErr: md.Topics[i].Error}
		}
	}

	out := diagnoseOutput{ClientID: id.ClientID, AZ: id.AZ, AZSource: id.AZSource, InterzoneLB: id.InterzoneLB, RackAware: id.RackAwarePartitioning}
	inZone := map[int]bool{}
	brokers := slices.SortedFunc(slices.Values(md.Brokers), func(a, b kafka.Broker) int { return a.ID - b.ID })
	for i, b := range brokers {
		local := id.AZ != "" && b.Rack == id.AZ
		inZone[b.ID] = local
		if i == maxListed {
			out.BrokersOmitted = len(brokers) - i
			continue
		}
		if i > maxListed {
			continue
		}
		addr := net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		out.Brokers = append(out.Brokers, diagnoseBroker{ID: b.ID, Addr: addr, Rack: b.Rack, InZone: local, RTTms: brokerRTT(ctx, cl, addr)})
	}
	racks := 0
	for _, b := range out.Brokers {
		if b.Rack != "" {
			racks++
		}
	}
	for _, t := range md.Topics {
		if t.Internal && topic == "" || t.Error != nil {
			continue
		}
		dt := diagnoseTopic{Name: t.Name, Partitions: len(t.Partitions), InZone: []int{}}
		all := []int{}
		for _, p := range t.Partitions {
			all = append(all, p.ID)
			if inZone[p.Leader.ID] {
				dt.LeadersInZone++
				dt.InZone = append(dt.InZone, p.ID)
			}
		}
		slices.Sort(dt.InZone)
		slices.Sort(all)
		dt.KeylessPartitions = all
		if id.RackAwarePartitioning && len(dt.InZone) > 0 {
			dt.KeylessPartitions = dt.InZone
		}
		out.Topics = append(out.Topics, dt)
	}
	slices.SortFunc(out.Topics, func(a, b diagnoseTopic) int { return strings.Compare(a.Name, b.Name) })
	out.Advice = diagnoseAdvice(out, racks)
	if len(out.Topics) > maxListed {
		out.TopicsOmitted = len(out.Topics) - maxListed
		out.Topics = out.Topics[:maxListed]
	}
	return diagnoseResult{out: out}
}

// capWriter writes at most left bytes to w, then one line saying the rest
// was cut.
type capWriter struct {
	w    io.Writer
	left int
	cut  bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.cut {
		return len(p), nil
	}
	if len(p) > c.left {
		_, err := c.w.Write(p[:c.left])
		c.cut = true
		if err == nil {
			_, err = fmt.Fprintf(c.w, "\n... output cut at %d bytes\n", maxDiagnoseOutput)
		}
		return len(p), err
	}
	c.left -= len(p)
	return c.w.Write(p)
}
