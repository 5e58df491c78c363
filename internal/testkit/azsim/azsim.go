// Package azsim simulates a multi-AZ, WarpStream-style Kafka cluster on
// loopback, to measure end to end whether clients converge to agents in
// their own availability zone.
//
// A Sim fronts one backend broker (embedded or real Kafka) with N agents.
// Each agent has an AZ label and its own loopback listener (a kproxy.Proxy)
// and forwards every request to the backend: like WarpStream agents, any
// agent serves any partition. Agents can be added and removed while clients
// run.
//
//	sim, err := azsim.Start(broker, azsim.Interval(200*time.Millisecond))
//	if err != nil { ... }
//	defer sim.Close()
//	a, _ := sim.AddAgent("az-a")
//	w := &kafka.Writer{Addr: kafka.TCP(a.Addr()), Topic: "t",
//		Transport: &kafka.Transport{ClientID: "warpstream_az=az-b,warpstream_interzone_lb=true"}}
//	...
//	sim.AddAgent("az-b") // within one interval the writer is moved to az-b
//	fmt.Println(sim.Stats().CrossAZ())
//
// What the agents do, as WarpStream agents do:
//
//   - Zone-aware discovery. Metadata responses list as brokers the agents in
//     the client's AZ, read from the client ID (warpstream_az=<az> or its
//     alias ws_az=<az>; the ID is split on ',' and then on '=', with no
//     escaping), and spread partition leadership, replicas and ISR over them.
//     With no AZ in the client ID, or no agent in that AZ, every agent is
//     listed. FindCoordinator (v0-v6, including batched v4+) answers with an
//     agent chosen the same way. Responses are decoded and re-encoded with
//     kmsg for the version the client sent; other requests and responses
//     pass through untouched.
//   - Interzone load balancing. Every Interval, each agent closes the
//     connections whose client ID carries warpstream_interzone_lb=true and
//     whose AZ differs from the agent's, provided an agent exists in the
//     client's AZ.
//   - Accounting: bytes and requests per (client AZ, agent AZ) pair, with
//     Produce and Fetch bytes apart, connections closed by load balancing,
//     and the same per client ID. See Stats.
//
// Backend: a single broker. Every agent forwards to it, so it leads every
// partition and coordinates every group. Start checks that the backend
// advertises exactly one broker; multi-broker backends (where an agent would
// have to route each partition to its real leader) are not supported.
//
// A Sim is safe for concurrent use.
package azsim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client ID keys the agents read.
const (
	KeyAZ          = "warpstream_az"
	KeyAZAlias     = "ws_az"
	KeyInterzoneLB = "warpstream_interzone_lb"
)

// ClientInfo is what an agent reads from a client ID.
type ClientInfo struct {
	AZ          string // "" when the client ID names none
	InterzoneLB bool   // warpstream_interzone_lb=true
}

// ParseClientID reads a client ID the way a WarpStream agent does: split on
// ',' then on '='. Segments without '=' (such as a leading application ID)
// and unknown keys are ignored; when a key repeats, the last one wins.
func ParseClientID(id string) ClientInfo {
	var ci ClientInfo
	for _, seg := range strings.Split(id, ",") {
		k, v, ok := strings.Cut(seg, "=")
		if !ok {
			continue
		}
		switch k {
		case KeyAZ, KeyAZAlias:
			ci.AZ = v
		case KeyInterzoneLB:
			ci.InterzoneLB = v == "true"
		}
	}
	return ci
}

// Option configures Start.
type Option func(*config)

type config struct {
	interval time.Duration
	logger   *slog.Logger
	now      func() time.Time
	locate   func(clientID string) string
	check    bool
}

// Interval sets the interzone load-balancing interval, like the agent's
// -kafkaInterzoneLoadBalancingInterval. Zero or negative turns the loop
// off (call BalanceNow instead). Default: 1s.
func Interval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// Logger sets the logger. Default: discard.
func Logger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Clock sets the time source used for Stats timestamps. Default: time.Now.
func Clock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// Locate sets where clients really are, for accounting only: it is asked
// for the AZ of clients whose ID names none (plain kafka-go clients), so
// that their cross-AZ traffic is counted. Agents never use it for routing.
// Default: such clients are accounted under client AZ "".
func Locate(f func(clientID string) string) Option { return func(c *config) { c.locate = f } }

// SkipBackendCheck skips Start's check that the backend is a single
// broker (which costs one Metadata round trip).
func SkipBackendCheck() Option { return func(c *config) { c.check = false } }

// Sim is a running simulated cluster.
type Sim struct {
	backend string
	cfg     config

	mu     sync.Mutex
	agents []*Agent // ordered by ID
	nextID int32
	closed bool

	stats stats

	stop chan struct{}
	done chan struct{}
}

// Agent is one simulated agent. Its methods are safe for concurrent use.
type Agent struct {
	id    int32
	az    string
	proxy *kproxy.Proxy
	host  string
	port  int32
	fault atomic.Pointer[func(kproxy.Request) kproxy.Action]
}

// ID returns the agent's node ID, as advertised in Metadata.
func (a *Agent) ID() int32 { return a.id }

// AZ returns the agent's availability zone.
func (a *Agent) AZ() string { return a.az }

// Addr returns the agent's host:port.
func (a *Agent) Addr() string { return a.proxy.Addr() }

// Proxy returns the agent's proxy, for its connection controls (Conns,
// CloseAll, ResetAll, SetRefusing, OnConnect). Its OnRequest and OnResponse
// hooks belong to the simulator: inject request faults with SetFault.
func (a *Agent) Proxy() *kproxy.Proxy { return a.proxy }

// SetFault sets a per-request fault hook, called after the request is
// accounted; nil removes it. See kproxy.Action.
func (a *Agent) SetFault(f func(kproxy.Request) kproxy.Action) {
	if f == nil {
		a.fault.Store(nil)
		return
	}
	a.fault.Store(&f)
}

// Start starts a simulator with no agents in front of backend (host:port).
func Start(backend string, opts ...Option) (*Sim, error) {
	cfg := config{interval: time.Second, now: time.Now, check: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	if _, _, err := net.SplitHostPort(backend); err != nil {
		return nil, fmt.Errorf("azsim: backend %q: %w", backend, err)
	}
	if cfg.check {
		if err := checkSingleBroker(backend); err != nil {
			return nil, err
		}
	}
	s := &Sim{backend: backend, cfg: cfg, nextID: 1, stop: make(chan struct{}), done: make(chan struct{})}
	s.stats.init()
	if cfg.interval > 0 {
		go s.balanceLoop()
	} else {
		close(s.done)
	}
	return s, nil
}

func checkSingleBroker(backend string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&kafka.Dialer{ClientID: "azsim-check"}).DialContext(ctx, "tcp", backend)
	if err != nil {
		return fmt.Errorf("azsim: backend %q: %w", backend, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	brokers, err := conn.Brokers()
	if err != nil {
		return fmt.Errorf("azsim: backend %q: metadata: %w", backend, err)
	}
	if len(brokers) != 1 {
		return fmt.Errorf("azsim: backend %q advertises %d brokers; only a single-broker backend is supported", backend, len(brokers))
	}
	return nil
}

// AddAgent starts an agent in az, listening on a new loopback port.
func (s *Sim) AddAgent(az string) (*Agent, error) {
	if az == "" || strings.ContainsAny(az, ",=") {
		return nil, fmt.Errorf("azsim: agent AZ %q: must be non-empty and free of ',' and '='", az)
	}
	p, err := kproxy.Start(s.backend, kproxy.AdvertiseSelf(false), kproxy.Logger(s.cfg.logger))
	if err != nil {
		return nil, fmt.Errorf("azsim: agent in %q: %w", az, err)
	}
	host, portStr, _ := net.SplitHostPort(p.Addr())
	port, _ := strconv.Atoi(portStr)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = p.Close()
		return nil, errors.New("azsim: closed")
	}
	a := &Agent{id: s.nextID, az: az, proxy: p, host: host, port: int32(port)}
	s.nextID++
	s.agents = append(s.agents, a)
	s.mu.Unlock()
	p.OnRequest(func(r kproxy.Request) kproxy.Action {
		s.stats.request(s.clientAZ(r.ClientID), a.az, r.ClientID, r.Key, r.Size, s.cfg.now)
		if f := a.fault.Load(); f != nil {
			return (*f)(r)
		}
		return kproxy.Forward
	})
	p.OnResponse(func(r kproxy.Request, resp []byte) []byte {
		switch r.Key {
		case 3:
			resp = s.rewriteMetadata(r, resp)
		case 10:
			resp = s.rewriteFindCoordinator(r, resp)
		}
		s.stats.response(s.clientAZ(r.ClientID), a.az, r.ClientID, r.Key, 4+len(resp), s.cfg.now)
		return resp
	})
	s.cfg.logger.Info("azsim: agent added", "id", a.id, "az", az, "addr", p.Addr())
	return a, nil
}

// RemoveAgent stops an agent: its listener closes (new connects are
// refused) and its connections are closed.
func (s *Sim) RemoveAgent(a *Agent) error {
	s.mu.Lock()
	i := s.indexOf(a)
	if i < 0 {
		s.mu.Unlock()
		return fmt.Errorf("azsim: agent %d (%s) is not running", a.id, a.az)
	}
	s.agents = append(s.agents[:i:i], s.agents[i+1:]...)
	s.mu.Unlock()
	s.cfg.logger.Info("azsim: agent removed", "id", a.id, "az", a.az)
	return a.proxy.Close()
}

func (s *Sim) indexOf(a *Agent) int {
	for i, x := range s.agents {
		if x == a {
			return i
		}
	}
	return -1
}

// Agents returns the running agents, ordered by ID.
func (s *Sim) Agents() []*Agent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Agent(nil), s.agents...)
}

// Addrs returns the running agents' addresses, ordered by agent ID: a
// bootstrap list.
func (s *Sim) Addrs() []string {
	var out []string
	for _, a := range s.Agents() {
		out = append(out, a.Addr())
	}
	return out
}

// Close stops the balancing loop and every agent.
func (s *Sim) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	agents := s.agents
	s.agents = nil
	s.mu.Unlock()
	if s.cfg.interval > 0 {
		close(s.stop)
	}
	<-s.done
	var errs []error
	for _, a := range agents {
		errs = append(errs, a.proxy.Close())
	}
	return errors.Join(errs...)
}

// clientAZ is the AZ a client is accounted under.
func (s *Sim) clientAZ(clientID string) string {
	if az := ParseClientID(clientID).AZ; az != "" {
		return az
	}
	if s.cfg.locate != nil {
		return s.cfg.locate(clientID)
	}
	return ""
}

// visibleAgents returns the agents a client with this ID is told about.
func (s *Sim) visibleAgents(clientID string) []*Agent {
	all := s.Agents()
	az := ParseClientID(clientID).AZ
	if az == "" {
		return all
	}
	var local []*Agent
	for _, a := range all {
		if a.az == az {
			local = append(local, a)
		}
	}
	if len(local) == 0 {
		return all // discovery favours availability
	}
	return local
}

func (s *Sim) rewriteMetadata(r kproxy.Request, resp []byte) []byte {
	m, err := kproxy.DecodeResponse(r, resp)
	if err != nil {
		s.cfg.logger.Warn("azsim: metadata response not rewritten", "err", err)
		return resp
	}
	md := m.(*kmsg.MetadataResponse)
	agents := s.visibleAgents(r.ClientID)
	md.Brokers = md.Brokers[:0]
	for _, a := range agents {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = a.id, a.host, a.port
		rack := a.az
		b.Rack = &rack
		md.Brokers = append(md.Brokers, b)
	}
	if len(agents) == 0 {
		md.ControllerID = -1
	} else {
		md.ControllerID = agents[0].id
	}
	for ti := range md.Topics {
		for pi := range md.Topics[ti].Partitions {
			p := &md.Topics[ti].Partitions[pi]
			if p.Leader < 0 || len(agents) == 0 {
				continue // keep "no leader" as the backend said it
			}
			n := len(agents)
			rf := min(max(len(p.Replicas), 1), n)
			start := int(p.Partition) % n
			p.Leader = agents[start].id
			p.Replicas = p.Replicas[:0]
			for k := 0; k < rf; k++ {
				p.Replicas = append(p.Replicas, agents[(start+k)%n].id)
			}
			p.ISR = append(p.ISR[:0], p.Replicas...)
			p.OfflineReplicas = p.OfflineReplicas[:0]
		}
	}
	return kproxy.EncodeResponse(r, md)
}

func (s *Sim) rewriteFindCoordinator(r kproxy.Request, resp []byte) []byte {
	m, err := kproxy.DecodeResponse(r, resp)
	if err != nil {
		s.cfg.logger.Warn("azsim: find coordinator response not rewritten", "err", err)
		return resp
	}
	fc := m.(*kmsg.FindCoordinatorResponse)
	agents := s.visibleAgents(r.ClientID)
	if len(agents) == 0 {
		return resp
	}
	if fc.ErrorCode == 0 && r.Version < 4 {
		// v0-v3 do not echo the key: choose by client ID, stable per client.
		a := agents[pick(r.ClientID, len(agents))]
		fc.NodeID, fc.Host, fc.Port = a.id, a.host, a.port
	}
	for i := range fc.Coordinators {
		c := &fc.Coordinators[i]
		if c.ErrorCode == 0 {
			a := agents[pick(c.Key, len(agents))]
			c.NodeID, c.Host, c.Port = a.id, a.host, a.port
		}
	}
	return kproxy.EncodeResponse(r, fc)
}

func pick(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

func (s *Sim) balanceLoop() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.BalanceNow()
		}
	}
}

// BalanceNow runs one interzone load-balancing pass over every agent and
// returns the number of connections it closed.
func (s *Sim) BalanceNow() int {
	agents := s.Agents()
	zones := make(map[string]bool)
	for _, a := range agents {
		zones[a.az] = true
	}
	closed := 0
	for _, a := range agents {
		for _, c := range a.proxy.Conns() {
			ci := ParseClientID(c.ClientID)
			if !ci.InterzoneLB || ci.AZ == "" || ci.AZ == a.az || !zones[ci.AZ] {
				continue
			}
			if a.proxy.CloseConn(c.ID) {
				closed++
				s.stats.lbClose(ci.AZ, a.az, c.ClientID)
				s.cfg.logger.Debug("azsim: interzone close", "agent", a.id, "agent_az", a.az, "client_id", c.ClientID)
			}
		}
	}
	s.stats.passDone()
	return closed
}

// Pair is a (client AZ, agent AZ) pair.
type Pair struct{ ClientAZ, AgentAZ string }

// Cross reports whether the pair crosses zones. A pair with an unknown
// client AZ ("") is not counted as crossing.
func (p Pair) Cross() bool { return p.ClientAZ != "" && p.ClientAZ != p.AgentAZ }

// Traffic counts what flowed between clients and agents. Bytes include the
// 4-byte size prefixes, requests and responses both.
type Traffic struct {
	ProduceBytes int64 // Produce requests and their responses
	FetchBytes   int64 // Fetch requests and their responses
	OtherBytes   int64 // every other request and response
	Requests     int64
	LBCloses     int64 // connections closed by interzone load balancing
}

// Bytes is the total of all bytes.
func (t Traffic) Bytes() int64 { return t.ProduceBytes + t.FetchBytes + t.OtherBytes }

// Add returns t + u.
func (t Traffic) Add(u Traffic) Traffic {
	return Traffic{t.ProduceBytes + u.ProduceBytes, t.FetchBytes + u.FetchBytes, t.OtherBytes + u.OtherBytes,
		t.Requests + u.Requests, t.LBCloses + u.LBCloses}
}

// Sub returns t - u: the traffic between two snapshots.
func (t Traffic) Sub(u Traffic) Traffic {
	return Traffic{t.ProduceBytes - u.ProduceBytes, t.FetchBytes - u.FetchBytes, t.OtherBytes - u.OtherBytes,
		t.Requests - u.Requests, t.LBCloses - u.LBCloses}
}

// ClientStats is the traffic of one client ID.
type ClientStats struct {
	ClientAZ  string
	ByAgentAZ map[string]Traffic
}

// Stats is a snapshot of the simulator's accounting.
type Stats struct {
	Pairs   map[Pair]Traffic
	Clients map[string]ClientStats
	// LastCrossAZ is when the latest Produce or Fetch byte crossed zones
	// (zero if none did).
	LastCrossAZ time.Time
	// LBPasses counts the completed load-balancing passes (BalanceNow
	// calls): a pass that completed after an event saw every connection
	// open at that event.
	LBPasses int64
}

// CrossAZ sums the traffic of the pairs that cross zones.
func (s Stats) CrossAZ() Traffic {
	var t Traffic
	for p, tr := range s.Pairs {
		if p.Cross() {
			t = t.Add(tr)
		}
	}
	return t
}

// Total sums all traffic.
func (s Stats) Total() Traffic {
	var t Traffic
	for _, tr := range s.Pairs {
		t = t.Add(tr)
	}
	return t
}

// String renders the pairs, one line each, sorted.
func (s Stats) String() string {
	pairs := make([]Pair, 0, len(s.Pairs))
	for p := range s.Pairs {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].ClientAZ != pairs[j].ClientAZ {
			return pairs[i].ClientAZ < pairs[j].ClientAZ
		}
		return pairs[i].AgentAZ < pairs[j].AgentAZ
	})
	var b strings.Builder
	for _, p := range pairs {
		t := s.Pairs[p]
		fmt.Fprintf(&b, "client %-6q -> agent %-6q produce=%dB fetch=%dB other=%dB requests=%d lb_closes=%d\n",
			p.ClientAZ, p.AgentAZ, t.ProduceBytes, t.FetchBytes, t.OtherBytes, t.Requests, t.LBCloses)
	}
	return b.String()
}

// Stats returns a snapshot of the accounting.
func (s *Sim) Stats() Stats { return s.stats.snapshot() }

type stats struct {
	mu        sync.Mutex
	pairs     map[Pair]*Traffic
	clients   map[string]map[string]*Traffic // client ID -> agent AZ
	clientAZ  map[string]string
	lastCross time.Time
	passes    int64
}

func (st *stats) init() {
	st.pairs = make(map[Pair]*Traffic)
	st.clients = make(map[string]map[string]*Traffic)
	st.clientAZ = make(map[string]string)
}

// entries returns the pair and per-client counters to update; st.mu held.
func (st *stats) entries(clientAZ, agentAZ, clientID string) (*Traffic, *Traffic) {
	p := Pair{clientAZ, agentAZ}
	pt := st.pairs[p]
	if pt == nil {
		pt = new(Traffic)
		st.pairs[p] = pt
	}
	byAgent := st.clients[clientID]
	if byAgent == nil {
		byAgent = make(map[string]*Traffic)
		st.clients[clientID] = byAgent
		st.clientAZ[clientID] = clientAZ
	}
	ct := byAgent[agentAZ]
	if ct == nil {
		ct = new(Traffic)
		byAgent[agentAZ] = ct
	}
	return pt, ct
}

func (st *stats) add(clientAZ, agentAZ, clientID string, key int16, size int, now func() time.Time, isRequest bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	pt, ct := st.entries(clientAZ, agentAZ, clientID)
	for _, t := range []*Traffic{pt, ct} {
		switch key {
		case 0:
			t.ProduceBytes += int64(size)
		case 1:
			t.FetchBytes += int64(size)
		default:
			t.OtherBytes += int64(size)
		}
		if isRequest {
			t.Requests++
		}
	}
	if (key == 0 || key == 1) && (Pair{clientAZ, agentAZ}).Cross() {
		st.lastCross = now()
	}
}

func (st *stats) request(clientAZ, agentAZ, clientID string, key int16, size int, now func() time.Time) {
	st.add(clientAZ, agentAZ, clientID, key, size, now, true)
}

func (st *stats) response(clientAZ, agentAZ, clientID string, key int16, size int, now func() time.Time) {
	st.add(clientAZ, agentAZ, clientID, key, size, now, false)
}

func (st *stats) lbClose(clientAZ, agentAZ, clientID string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	pt, ct := st.entries(clientAZ, agentAZ, clientID)
	pt.LBCloses++
	ct.LBCloses++
}

func (st *stats) passDone() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.passes++
}

func (st *stats) snapshot() Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := Stats{Pairs: make(map[Pair]Traffic, len(st.pairs)), Clients: make(map[string]ClientStats, len(st.clients)),
		LastCrossAZ: st.lastCross, LBPasses: st.passes}
	for p, t := range st.pairs {
		out.Pairs[p] = *t
	}
	for id, byAgent := range st.clients {
		cs := ClientStats{ClientAZ: st.clientAZ[id], ByAgentAZ: make(map[string]Traffic, len(byAgent))}
		for az, t := range byAgent {
			cs.ByAgentAZ[az] = *t
		}
		out.Clients[id] = cs
	}
	return out
}
