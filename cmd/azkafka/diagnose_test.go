package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/hostile"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
)

// rackedBroker starts an embedded broker with topic "events" (4
// partitions), or the topics given, behind a proxy that gives it the rack
// rack, and returns the proxy's address.
func rackedBroker(t *testing.T, rack string, topics ...embedded.Option) string {
	t.Helper()
	if len(topics) == 0 {
		topics = []embedded.Option{embedded.Topic("events", 4)}
	}
	c := embedded.StartT(t, topics...)
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rewriteMetadata(t, p, func(mr *kmsg.MetadataResponse) {
		for i := range mr.Brokers {
			mr.Brokers[i].Rack = &rack
		}
	})
	return p.Addr()
}

func TestDiagnoseCommand(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rack      string
		env       map[string]string
		wantLocal bool
		keyless   int    // partitions keyless messages would use
		advice    string // in one line of advice
	}{
		{"in zone, rack-aware", "az-a", map[string]string{"AZKAFKA_AZ": "az-a", "AZKAFKA_RACK_AWARE_PARTITIONING": "true"}, true, 4,
			"send keyless messages to the 4 partitions led in-zone [0 1 2 3]"},
		{"in zone, option off", "az-a", map[string]string{"AZKAFKA_AZ": "az-a"}, true, 4,
			"AZKAFKA_RACK_AWARE_PARTITIONING=true would use the 4 led in-zone"},
		{"other zone", "az-b", map[string]string{"AZKAFKA_AZ": "az-a", "AZKAFKA_RACK_AWARE_PARTITIONING": "true"}, false, 4,
			`find no broker with rack "az-a"`},
		{"no racks", "", map[string]string{"AZKAFKA_AZ": "az-a"}, false, 4,
			"find no broker rack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withClientIDEnv(t, tc.env, nil)
			addr := rackedBroker(t, tc.rack)
			var stdout, stderr bytes.Buffer
			if st := run([]string{"diagnose", "--bootstrap", addr, "--json", "--topic", "events"}, nil, &stdout, &stderr); st != exitOK {
				t.Fatalf("status %d, stderr %s", st, stderr.String())
			}
			var out diagnoseOutput
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				t.Fatalf("%v in %s", err, stdout.String())
			}
			if out.AZ != "az-a" || !strings.Contains(out.ClientID, "warpstream_az=az-a") {
				t.Errorf("AZ %q, client ID %q", out.AZ, out.ClientID)
			}
			if len(out.Brokers) != 1 || out.Brokers[0].Rack != tc.rack || out.Brokers[0].InZone != tc.wantLocal || out.Brokers[0].RTTms < 0 {
				t.Fatalf("brokers %+v; want one with rack %q, in zone %v and an RTT", out.Brokers, tc.rack, tc.wantLocal)
			}
			if len(out.Topics) != 1 || out.Topics[0].Partitions != 4 || len(out.Topics[0].KeylessPartitions) != tc.keyless {
				t.Fatalf("topics %+v", out.Topics)
			}
			if want := map[bool]int{true: 4, false: 0}[tc.wantLocal]; out.Topics[0].LeadersInZone != want {
				t.Errorf("leaders in zone %d, want %d", out.Topics[0].LeadersInZone, want)
			}
			if !strings.Contains(strings.Join(out.Advice, "\n"), tc.advice) {
				t.Errorf("advice %q lacks %q", out.Advice, tc.advice)
			}
			// The text form carries the same facts.
			stdout.Reset()
			if st := run([]string{"diagnose", "--bootstrap", addr, "--topic", "events"}, nil, &stdout, &stderr); st != exitOK {
				t.Fatalf("text: status %d, stderr %s", st, stderr.String())
			}
			for _, want := range []string{out.Brokers[0].Addr, "events", tc.advice} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("text output lacks %q:\n%s", want, stdout.String())
				}
			}
		})
	}
}

func TestDiagnoseCommandErrors(t *testing.T) {
	withClientIDEnv(t, map[string]string{"AZKAFKA_AZ": "az-a"}, nil)
	for _, tc := range []struct {
		args       []string
		env        map[string]string
		wantStatus int
		wantErr    string
	}{
		{[]string{}, nil, exitUsage, "--bootstrap is required"},
		{[]string{"--bootstrap", "broker"}, nil, exitUsage, `"broker" is not host:port`},
		{[]string{"--bootstrap", "127.0.0.1:9", "--timeout", "0s"}, nil, exitUsage, "--timeout=0s"},
		{[]string{"--bootstrap", "127.0.0.1:1", "--timeout", "2s"}, nil, exitFail, "no metadata from 127.0.0.1:1"},
		{[]string{"--bootstrap", "127.0.0.1:1"}, map[string]string{"AZKAFKA_AZ": "az-a", "AZKAFKA_RACK_AWARE_PARTITIONING": "maybe"}, exitUsage,
			`AZKAFKA_RACK_AWARE_PARTITIONING="maybe": want true or false`},
	} {
		if tc.env != nil {
			withClientIDEnv(t, tc.env, nil)
		}
		var stdout, stderr bytes.Buffer
		if st := run(append([]string{"diagnose"}, tc.args...), nil, &stdout, &stderr); st != tc.wantStatus || !strings.Contains(stderr.String(), tc.wantErr) {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", tc.args, st, stderr.String(), tc.wantStatus, tc.wantErr)
		}
	}
}

// TestDiagnoseTopicNotFound: --topic naming a topic the cluster does not
// have fails with status 1, naming the topic and the bootstrap, and prints
// nothing on stdout (with or without --json); a topic the cluster refuses
// to describe fails naming the refusal.
func TestDiagnoseTopicNotFound(t *testing.T) {
	withClientIDEnv(t, map[string]string{"AZKAFKA_AZ": "az-a"}, nil)
	c := embedded.StartT(t, embedded.Topic("events", 4))
	addr := c.Addrs()[0]
	for _, args := range [][]string{{"--topic", "nope"}, {"--topic", "nope", "--json"}} {
		var stdout, stderr bytes.Buffer
		st := run(append([]string{"diagnose", "--bootstrap", addr}, args...), nil, &stdout, &stderr)
		if want := fmt.Sprintf("azkafka diagnose: topic %q not found on %s\n", "nope", addr); st != exitFail || stderr.String() != want || stdout.Len() > 0 {
			t.Errorf("%v: status %d, stderr %q, stdout %q; want %d, %q and nothing", args, st, stderr.String(), stdout.String(), exitFail, want)
		}
	}

	p, err := kproxy.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rewriteMetadata(t, p, func(mr *kmsg.MetadataResponse) {
		for i := range mr.Topics {
			mr.Topics[i].ErrorCode, mr.Topics[i].Partitions = 29, nil // TOPIC_AUTHORIZATION_FAILED
		}
	})
	var stdout, stderr bytes.Buffer
	st := run([]string{"diagnose", "--bootstrap", p.Addr(), "--topic", "events"}, nil, &stdout, &stderr)
	if want := fmt.Sprintf("topic %q on %s: ", "events", p.Addr()); st != exitFail || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "check the user's ACLs") {
		t.Errorf("refused topic: status %d, stderr %q; want %d, %q and the ACL hint", st, stderr.String(), exitFail, want)
	}
}

// TestDiagnoseFoldsAdvice: against a broker without racks, the advice
// for its topics is one line naming how many, not one per topic.
func TestDiagnoseFoldsAdvice(t *testing.T) {
	withClientIDEnv(t, map[string]string{"AZKAFKA_AZ": "az-a"}, nil)
	addr := rackedBroker(t, "", embedded.Topic("t1", 2), embedded.Topic("t2", 3), embedded.Topic("t3", 1), embedded.Topic("t4", 4))
	var stdout, stderr bytes.Buffer
	if st := run([]string{"diagnose", "--bootstrap", addr}, nil, &stdout, &stderr); st != exitOK {
		t.Fatalf("status %d, stderr %s", st, stderr.String())
	}
	_, advice, _ := strings.Cut(stdout.String(), "the SDK would:\n")
	want := "  - send warpstream_interzone_lb=true (WarpStream agents close connections from other zones; Apache Kafka ignores it)\n" +
		"  - find no broker rack: set broker.rack on the brokers for rack-aware partitioning and zone-aware assignment to work\n" +
		"  - 4 topics (t1, t2, t3, ...): spread keyless messages over all their partitions (rack-aware partitioning off, and no partition led in-zone)\n"
	if advice != want {
		t.Errorf("advice:\n%s\nwant:\n%s", advice, want)
	}
}

// TestTopicAdvice: one topic gets its own line with its counts; several
// that the same advice applies to get one line naming how many.
func TestTopicAdvice(t *testing.T) {
	topic := func(name string, parts int, inZone ...int) diagnoseTopic {
		return diagnoseTopic{Name: name, Partitions: parts, LeadersInZone: len(inZone), InZone: inZone}
	}
	for _, tc := range []struct {
		name      string
		rackAware bool
		topics    []diagnoseTopic
		want      []string
	}{
		{"one topic, off", false, []diagnoseTopic{topic("a", 4, 0, 2)}, []string{
			"topic a: spread keyless messages over all 4 partitions (rack-aware partitioning off; AZKAFKA_RACK_AWARE_PARTITIONING=true would use the 2 led in-zone)",
			"topic a: with sdk.ZoneAffinityGroupBalancer, give consumers in this zone the 2 partitions led here first, as far as balance allows"}},
		{"one topic, none in zone", false, []diagnoseTopic{topic("a", 4)}, []string{
			"topic a: spread keyless messages over all 4 partitions (rack-aware partitioning off, and no partition led in-zone)"}},
		{"mixed, off", false, []diagnoseTopic{topic("a", 4, 1), topic("b", 2), topic("c", 3, 0, 1), topic("d", 1)}, []string{
			"2 topics (b, d): spread keyless messages over all their partitions (rack-aware partitioning off, and no partition led in-zone)",
			"2 topics (a, c): spread keyless messages over all their partitions (rack-aware partitioning off; AZKAFKA_RACK_AWARE_PARTITIONING=true would use those led in-zone, counted above)",
			"2 topics (a, c): with sdk.ZoneAffinityGroupBalancer, give consumers in this zone the partitions led here first, as far as balance allows"}},
		{"rack-aware", true, []diagnoseTopic{topic("a", 4, 1), topic("b", 2), topic("c", 3, 0, 1), topic("d", 5, 4), topic("e", 6, 5)}, []string{
			"topic b: spread keyless messages over all 2 partitions (no leader in-zone)",
			"4 topics (a, c, d, ...): send keyless messages to the partitions led in-zone (listed above); keyed messages keep their partition",
			"4 topics (a, c, d, ...): with sdk.ZoneAffinityGroupBalancer, give consumers in this zone the partitions led here first, as far as balance allows"}},
		{"no topics", true, nil, nil},
	} {
		got := topicAdvice(diagnoseOutput{RackAware: tc.rackAware, Topics: tc.topics})
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// TestDiagnoseTimeoutBoundsTheRun: against a broker that accepts and
// never answers, diagnose gives up with status 1 once --timeout (and its
// grace) is spent, saying so.
func TestDiagnoseTimeoutBoundsTheRun(t *testing.T) {
	withClientIDEnv(t, map[string]string{"AZKAFKA_AZ": "az-a"}, nil)
	srv, err := hostile.Start(hostile.Silent)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	st := run([]string{"diagnose", "--bootstrap", srv.Addr(), "--timeout", "300ms"}, nil, &stdout, &stderr)
	elapsed := time.Since(start)
	if st != exitFail || !strings.Contains(stderr.String(), "context deadline exceeded") && !strings.Contains(stderr.String(), "within --timeout=300ms") {
		t.Fatalf("status %d, stderr %q; want 1 and the deadline", st, stderr.String())
	}
	// A hang detector, not a speed claim: the bound is the timeout, the
	// grace and room for a loaded machine.
	if elapsed > 300*time.Millisecond+diagnoseGrace+5*time.Second {
		t.Errorf("diagnose --timeout 300ms ran %v", elapsed)
	}
	if srv.Faults() == 0 {
		t.Error("the silent broker never got a request")
	}
}

// TestDiagnoseCapsWhatItLists: past maxListed topics diagnose lists the
// first ones and counts the rest.
func TestDiagnoseCapsWhatItLists(t *testing.T) {
	withClientIDEnv(t, map[string]string{"AZKAFKA_AZ": "az-a"}, nil)
	var topics []embedded.Option
	for i := range maxListed + 5 {
		topics = append(topics, embedded.Topic(fmt.Sprintf("t%04d", i), 1))
	}
	c := embedded.StartT(t, topics...)
	var stdout, stderr bytes.Buffer
	if st := run([]string{"diagnose", "--bootstrap", c.Addrs()[0], "--json"}, nil, &stdout, &stderr); st != exitOK {
		t.Fatalf("status %d, stderr %s", st, stderr.String())
	}
	var out diagnoseOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%v in %.300s", err, stdout.String())
	}
	if len(out.Topics) != maxListed || out.TopicsOmitted != 5 || out.Topics[0].Name != "t0000" {
		t.Errorf("%d topics listed (first %q), %d omitted; want %d, t0000, 5", len(out.Topics), out.Topics[0].Name, out.TopicsOmitted, maxListed)
	}
	stdout.Reset()
	if st := run([]string{"diagnose", "--bootstrap", c.Addrs()[0]}, nil, &stdout, &stderr); st != exitOK {
		t.Fatalf("status %d, stderr %s", st, stderr.String())
	}
	if !strings.Contains(stdout.String(), "... and 5 more topics (use --topic NAME)") {
		t.Errorf("text output does not count the topics left out:\n%.500s", stdout.String()[max(0, stdout.Len()-500):])
	}
}

func TestCapWriter(t *testing.T) {
	var b bytes.Buffer
	w := &capWriter{w: &b, left: 10}
	for _, s := range []string{"0123", "45678", "9abc", "def"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if want := "0123456789\n... output cut at 1048576 bytes\n"; b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
}

// rewriteMetadata makes p hand every Metadata response to edit before the
// client sees it.
func rewriteMetadata(t *testing.T, p *kproxy.Proxy, edit func(*kmsg.MetadataResponse)) {
	p.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key != 3 {
			return resp
		}
		r, err := kproxy.DecodeResponse(req, resp)
		if err != nil {
			t.Errorf("decoding metadata: %v", err)
			return resp
		}
		mr := r.(*kmsg.MetadataResponse)
		edit(mr)
		return kproxy.EncodeResponse(req, mr)
	})
}
