package azsim_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/azsim"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestParseClientID(t *testing.T) {
	cases := []struct {
		id   string
		want azsim.ClientInfo
	}{
		{"", azsim.ClientInfo{}},
		{"my-app", azsim.ClientInfo{}},
		{"warpstream_az=az-b", azsim.ClientInfo{AZ: "az-b"}},
		{"ws_az=az-c", azsim.ClientInfo{AZ: "az-c"}},
		{"app,warpstream_session_id=1,warpstream_az=us-east-1a,warpstream_interzone_lb=true", azsim.ClientInfo{AZ: "us-east-1a", InterzoneLB: true}},
		{"warpstream_interzone_lb=TRUE,warpstream_az=x", azsim.ClientInfo{AZ: "x"}},
		{"warpstream_az=a,ws_az=b", azsim.ClientInfo{AZ: "b"}},
		{"warpstream_az=a=b", azsim.ClientInfo{AZ: "a=b"}},
		{"warpstream_az", azsim.ClientInfo{}},
		{",,warpstream_az=,", azsim.ClientInfo{}},
	}
	for _, tc := range cases {
		if got := azsim.ParseClientID(tc.id); got != tc.want {
			t.Errorf("ParseClientID(%q) = %+v, want %+v", tc.id, got, tc.want)
		}
	}
}

// newSim starts an embedded broker with topic and a simulator with agents
// in the given AZs (loop off unless interval > 0).
func newSim(t *testing.T, topic string, parts int, interval time.Duration, azs ...string) (*azsim.Sim, []*azsim.Agent, string) {
	t.Helper()
	c := embedded.StartT(t, embedded.Topic(topic, parts))
	sim, err := azsim.Start(c.Addrs()[0], azsim.Interval(interval))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	var agents []*azsim.Agent
	for _, az := range azs {
		a, err := sim.AddAgent(az)
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	return sim, agents, c.Addrs()[0]
}

// roundTrip sends one request on a fresh connection and decodes the
// response.
func roundTrip(t *testing.T, addr, clientID string, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := kproxy.RoundTrip(ctx, addr, clientID, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func ids(agents []*azsim.Agent, azs ...string) []int32 {
	var out []int32
	for _, a := range agents {
		if len(azs) == 0 || slices.Contains(azs, a.AZ()) {
			out = append(out, a.ID())
		}
	}
	return out
}

// backendMax asks the backend for the highest version it supports of key.
func backendMax(t *testing.T, backend string, key int16) int16 {
	req := kmsg.NewPtrApiVersionsRequest()
	resp := roundTrip(t, backend, "probe", req).(*kmsg.ApiVersionsResponse)
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return k.MaxVersion
		}
	}
	t.Fatalf("backend does not support key %d", key)
	return 0
}

// TestMetadataDiscovery checks, for every Metadata version the backend
// and kmsg share, which agents each client is told about and that
// partition leadership is spread over exactly those agents.
func TestMetadataDiscovery(t *testing.T) {
	const topic = "disco"
	_, agents, backend := newSim(t, topic, 6, 0, "az-a", "az-a", "az-b")
	cases := []struct {
		clientID string
		want     []int32
	}{
		{"warpstream_az=az-b", ids(agents, "az-b")},
		{"ws_az=az-a", ids(agents, "az-a")},
		{"app,warpstream_session_id=s,warpstream_az=az-a,warpstream_interzone_lb=true", ids(agents, "az-a")},
		{"", ids(agents)},
		{"plain-kafka-go", ids(agents)},
		{"warpstream_az=az-c", ids(agents)},
	}
	maxV := min(backendMax(t, backend, 3), kmsg.NewPtrMetadataRequest().MaxVersion())
	for v := int16(0); v <= maxV; v++ {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("v%d/%s", v, tc.clientID), func(t *testing.T) {
				req := kmsg.NewPtrMetadataRequest()
				req.SetVersion(v)
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(topic)
				req.Topics = append(req.Topics, rt)
				// Ask a az-a agent: the answer must not depend on it.
				resp := roundTrip(t, agents[0].Addr(), tc.clientID, req).(*kmsg.MetadataResponse)
				var got []int32
				addrs := map[int32]string{}
				for _, a := range agents {
					addrs[a.ID()] = a.Addr()
				}
				for _, b := range resp.Brokers {
					got = append(got, b.NodeID)
					if hp := net.JoinHostPort(b.Host, fmt.Sprint(b.Port)); hp != addrs[b.NodeID] {
						t.Errorf("broker %d advertised at %s, agent listens on %s", b.NodeID, hp, addrs[b.NodeID])
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Fatalf("brokers %v, want %v", got, tc.want)
				}
				var tp *kmsg.MetadataResponseTopic
				for i := range resp.Topics {
					if resp.Topics[i].Topic != nil && *resp.Topics[i].Topic == topic {
						tp = &resp.Topics[i]
					}
				}
				if tp == nil || len(tp.Partitions) != 6 {
					t.Fatalf("topic %q missing or partitions wrong: %+v", topic, resp.Topics)
				}
				leaders := map[int32]bool{}
				for _, p := range tp.Partitions {
					leaders[p.Leader] = true
					if !slices.Contains(tc.want, p.Leader) {
						t.Fatalf("partition %d led by %d, not a listed agent %v", p.Partition, p.Leader, tc.want)
					}
					if len(p.Replicas) == 0 || p.Replicas[0] != p.Leader || !slices.Equal(p.ISR, p.Replicas) {
						t.Fatalf("partition %d: leader %d replicas %v isr %v", p.Partition, p.Leader, p.Replicas, p.ISR)
					}
				}
				if len(leaders) != len(tc.want) {
					t.Fatalf("leadership on %d agents, want spread over all %d", len(leaders), len(tc.want))
				}
			})
		}
	}
}

// TestFindCoordinator checks every FindCoordinator version, single-key
// (v0-v3) and batched (v4+), answers with an agent in the client's AZ.
func TestFindCoordinator(t *testing.T) {
	_, agents, backend := newSim(t, "fc", 1, 0, "az-a", "az-b", "az-b")
	maxV := min(backendMax(t, backend, 10), kmsg.NewPtrFindCoordinatorRequest().MaxVersion())
	if maxV < 4 {
		t.Fatalf("backend supports FindCoordinator up to v%d; the batched form is untested", maxV)
	}
	byAddr := map[string]*azsim.Agent{}
	for _, a := range agents {
		byAddr[a.Addr()] = a
	}
	for v := int16(0); v <= maxV; v++ {
		for _, tc := range []struct{ clientID, wantAZ string }{
			{"warpstream_az=az-a", "az-a"},
			{"ws_az=az-b", "az-b"},
			{"warpstream_az=az-z", ""}, // any agent
		} {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(v)
			keys := []string{"g1", "g2", "g3", "g4"}
			if v < 4 {
				req.CoordinatorKey = keys[0]
			} else {
				req.CoordinatorKeys = keys
			}
			resp := roundTrip(t, agents[0].Addr(), tc.clientID, req).(*kmsg.FindCoordinatorResponse)
			type coord struct {
				id         int32
				host       string
				port       int32
				errCode    int16
				key        string
				wantAnswer bool
			}
			var got []coord
			if v < 4 {
				got = append(got, coord{resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, keys[0], true})
			} else {
				for _, c := range resp.Coordinators {
					got = append(got, coord{c.NodeID, c.Host, c.Port, c.ErrorCode, c.Key, true})
				}
				if len(got) != len(keys) {
					t.Fatalf("v%d: %d coordinators for %d keys", v, len(got), len(keys))
				}
			}
			for _, c := range got {
				if c.errCode != 0 {
					t.Fatalf("v%d key %q: error code %d", v, c.key, c.errCode)
				}
				a := byAddr[net.JoinHostPort(c.host, fmt.Sprint(c.port))]
				if a == nil || a.ID() != c.id {
					t.Fatalf("v%d %s key %q: coordinator %d at %s:%d is not an agent", v, tc.clientID, c.key, c.id, c.host, c.port)
				}
				if tc.wantAZ != "" && a.AZ() != tc.wantAZ {
					t.Fatalf("v%d %s key %q: coordinator in %s, want %s", v, tc.clientID, c.key, a.AZ(), tc.wantAZ)
				}
			}
		}
	}
}

// dialAgent opens a kafka-go connection to an agent with a client ID and
// sends one request, so the agent knows the ID.
func dialAgent(t *testing.T, a *azsim.Agent, clientID string) *kafka.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := (&kafka.Dialer{ClientID: clientID}).DialContext(ctx, "tcp", a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Brokers(); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestBalanceNow checks which connections a balancing pass closes, before
// and after an agent appears in the client's AZ.
func TestBalanceNow(t *testing.T) {
	sim, agents, _ := newSim(t, "lb", 1, 0, "az-a")
	azA := agents[0]
	lbB := "app,warpstream_az=az-b,warpstream_interzone_lb=true"
	conns := map[string]*kafka.Conn{
		lbB:                  dialAgent(t, azA, lbB),
		"warpstream_az=az-b": dialAgent(t, azA, "warpstream_az=az-b"),
		"warpstream_az=az-a,warpstream_interzone_lb=true": dialAgent(t, azA, "warpstream_az=az-a,warpstream_interzone_lb=true"),
		"warpstream_interzone_lb=true":                    dialAgent(t, azA, "warpstream_interzone_lb=true"),
		"warpstream_az=az-c,warpstream_interzone_lb=true": dialAgent(t, azA, "warpstream_az=az-c,warpstream_interzone_lb=true"),
	}
	if n := sim.BalanceNow(); n != 0 {
		t.Fatalf("no agent in az-b yet: closed %d connections, want 0", n)
	}
	azB, err := sim.AddAgent("az-b")
	if err != nil {
		t.Fatal(err)
	}
	dialAgent(t, azB, lbB) // already local: must stay
	if n := sim.BalanceNow(); n != 1 {
		t.Fatalf("closed %d connections, want 1 (the az-b client with the flag on the az-a agent)", n)
	}
	time.Sleep(20 * time.Millisecond)
	for id, c := range conns {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Brokers()
		if closed := err != nil; closed != (id == lbB) {
			t.Errorf("client %q: after balancing err = %v", id, err)
		}
	}
	st := sim.Stats()
	if got := st.Pairs[azsim.Pair{ClientAZ: "az-b", AgentAZ: "az-a"}].LBCloses; got != 1 {
		t.Fatalf("pair az-b->az-a LB closes = %d, want 1\n%s", got, st)
	}
	if got := st.Clients[lbB].ByAgentAZ["az-a"].LBCloses; got != 1 {
		t.Fatalf("client %q LB closes = %d, want 1", lbB, got)
	}
	if n := len(azB.Proxy().Conns()); n != 1 {
		t.Fatalf("az-b agent has %d connections, want 1", n)
	}
}

// TestBalanceLoopAndRemove checks the interval loop closes a connection by
// itself and that removing an agent refuses new connections.
func TestBalanceLoopAndRemove(t *testing.T) {
	sim, agents, _ := newSim(t, "loop", 1, 50*time.Millisecond, "az-a", "az-b")
	id := "warpstream_az=az-b,warpstream_interzone_lb=true"
	c := dialAgent(t, agents[0], id)
	deadline := time.Now().Add(5 * time.Second)
	for sim.Stats().CrossAZ().LBCloses == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Brokers(); err == nil {
		t.Fatalf("connection still open after the balancing loop ran (stats:\n%s)", sim.Stats())
	}
	if err := sim.RemoveAgent(agents[1]); err != nil {
		t.Fatal(err)
	}
	if err := sim.RemoveAgent(agents[1]); err == nil {
		t.Fatal("removing an agent twice: no error")
	}
	if _, err := net.DialTimeout("tcp", agents[1].Addr(), time.Second); err == nil {
		t.Fatal("removed agent still accepts connections")
	}
	if got := sim.Addrs(); !slices.Equal(got, []string{agents[0].Addr()}) {
		t.Fatalf("Addrs() = %v, want only the az-a agent", got)
	}
}

// TestAccounting produces and consumes through an az-a agent as an az-b
// client and checks the pair counters against the proxy's own byte counts
// and the payload sizes.
func TestAccounting(t *testing.T) {
	const topic = "acct"
	sim, agents, _ := newSim(t, topic, 1, 0, "az-a")
	id := "warpstream_az=az-b"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// One connection, straight to the agent, so that the proxy's live
	// connection list covers all traffic.
	host, port, _ := net.SplitHostPort(agents[0].Addr())
	portN, _ := strconv.Atoi(port)
	conn, err := (&kafka.Dialer{ClientID: id}).DialPartition(ctx, "tcp", "", kafka.Partition{
		Topic: topic, ID: 0, Leader: kafka.Broker{Host: host, Port: portN, ID: int(agents[0].ID())}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	payload := strings.Repeat("x", 10000)
	for i := 0; i < 5; i++ {
		if _, err := conn.WriteMessages(kafka.Message{Value: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	batch := conn.ReadBatch(1, 1<<20)
	var read int
	for {
		m, err := batch.ReadMessage()
		if err != nil {
			break
		}
		read += len(m.Value)
	}
	_ = batch.Close()
	if read != 5*len(payload) {
		t.Fatalf("read %d bytes of values, want %d", read, 5*len(payload))
	}
	st := sim.Stats()
	pair := st.Pairs[azsim.Pair{ClientAZ: "az-b", AgentAZ: "az-a"}]
	if pair.ProduceBytes < int64(5*len(payload)) || pair.FetchBytes < int64(5*len(payload)) {
		t.Fatalf("pair az-b->az-a = %+v, want produce and fetch bytes >= %d each", pair, 5*len(payload))
	}
	if pair.ProduceBytes > int64(6*len(payload)) || pair.FetchBytes > int64(6*len(payload)) {
		t.Fatalf("pair az-b->az-a = %+v: more than 20%% overhead over %d payload bytes", pair, 5*len(payload))
	}
	if cross := st.CrossAZ(); cross != pair || st.LastCrossAZ.IsZero() {
		t.Fatalf("CrossAZ() = %+v, want the one pair %+v; LastCrossAZ %v", cross, pair, st.LastCrossAZ)
	}
	// Every byte the proxies relayed on live connections is accounted.
	var relayed int64
	var requests int64
	for _, c := range agents[0].Proxy().Conns() {
		relayed += c.BytesIn + c.BytesOut
		requests += c.Requests
	}
	if got := st.Total(); got.Bytes() != relayed || got.Requests != requests {
		t.Fatalf("accounted %d bytes / %d requests, proxies relayed %d / %d", got.Bytes(), got.Requests, relayed, requests)
	}
	if cs := st.Clients[id]; cs.ClientAZ != "az-b" || cs.ByAgentAZ["az-a"] != pair {
		t.Fatalf("client stats %+v, want az-b with the pair's traffic", cs)
	}
}

func TestLocate(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("loc", 1))
	sim, err := azsim.Start(c.Addrs()[0], azsim.Interval(0), azsim.Locate(func(id string) string {
		if id == "plain" {
			return "az-b"
		}
		return ""
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	a, err := sim.AddAgent("az-a")
	if err != nil {
		t.Fatal(err)
	}
	dialAgent(t, a, "plain")
	dialAgent(t, a, "nowhere")
	st := sim.Stats()
	var pairs []string
	for p := range st.Pairs {
		pairs = append(pairs, p.ClientAZ+">"+p.AgentAZ)
	}
	sort.Strings(pairs)
	if !slices.Equal(pairs, []string{">az-a", "az-b>az-a"}) {
		t.Fatalf("pairs %v, want the located client under az-b and the other under \"\"", pairs)
	}
}

func TestStartErrors(t *testing.T) {
	multi := embedded.StartT(t, embedded.Brokers(2))
	cases := []struct {
		name, backend, want string
	}{
		{"no port", "localhost", `"localhost"`},
		{"nothing listening", "127.0.0.1:1", `"127.0.0.1:1"`},
		{"two brokers", multi.Addrs()[0], "advertises 2 brokers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := azsim.Start(tc.backend)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start(%q) = %v, want an error containing %s", tc.backend, err, tc.want)
			}
		})
	}
	sim, _, _ := newSim(t, "x", 1, 0)
	for _, az := range []string{"", "a,b", "a=b"} {
		if _, err := sim.AddAgent(az); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", az)) {
			t.Errorf("AddAgent(%q) = %v, want an error naming it", az, err)
		}
	}
}

// TestCloseLeavesNoGoroutines checks that Close stops the balancing loop
// and every agent's relay goroutines, with clients still connected.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("leak", 1))
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	sim, err := azsim.Start(c.Addrs()[0], azsim.Interval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var agents []*azsim.Agent
	for _, az := range []string{"az-a", "az-b", "az-b"} {
		a, err := sim.AddAgent(az)
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	for _, a := range agents {
		conn, err := net.Dial("tcp", a.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("warpstream_az=az-b,warpstream_interzone_lb=true"))
		if _, err := conn.Write(f.AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sim.RemoveAgent(agents[2]); err != nil {
		t.Fatal(err)
	}
	if err := sim.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.AddAgent("az-c"); err == nil {
		t.Fatal("AddAgent after Close: no error")
	}
}

// TestSetFault drops the response to the first Produce through an agent:
// the broker stores the message, the client sees the connection close, and
// the request is still accounted.
func TestSetFault(t *testing.T) {
	const topic = "fault"
	sim, agents, backend := newSim(t, topic, 1, 0, "az-a")
	var produces atomic.Int32
	agents[0].SetFault(func(r kproxy.Request) kproxy.Action {
		if r.Key == 0 && produces.Add(1) == 1 {
			return kproxy.CloseAfter
		}
		return kproxy.Forward
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&kafka.Dialer{ClientID: "warpstream_az=az-a"}).DialLeader(ctx, "tcp", agents[0].Addr(), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.WriteMessages(kafka.Message{Value: []byte("v")}); err == nil {
		t.Fatal("write succeeded although its response was dropped")
	}
	bc, err := kafka.DialLeader(ctx, "tcp", backend, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if last, err := bc.ReadLastOffset(); err != nil || last != 1 {
		t.Fatalf("broker end offset %d (%v), want 1: the broker should have the message", last, err)
	}
	if got := sim.Stats().Pairs[azsim.Pair{ClientAZ: "az-a", AgentAZ: "az-a"}]; got.ProduceBytes == 0 {
		t.Fatalf("faulted produce not accounted: %+v", got)
	}
	agents[0].SetFault(nil)
}
