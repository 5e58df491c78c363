package azdetect

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every test here talks to loopback only. loopbackDial is the dialer of
// every test Config: it fails the test, and the dial, for any other address.
func loopbackDial(t testing.TB, dials *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("dial %q: %v", addr, err)
			return nil, err
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Errorf("test tried to dial non-loopback address %q", addr)
			return nil, fmt.Errorf("test dialer: %q is not loopback", addr)
		}
		if dials != nil {
			dials.Add(1)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// refusedAddr returns a loopback host:port where nothing listens.
func refusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// blackHole accepts connections and never answers; it closes them at
// cleanup. It stands for a metadata address that swallows packets.
type blackHole struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
	done     chan struct{}
}

func newBlackHole(t testing.TB) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bh := &blackHole{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(bh.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			bh.accepted.Add(1)
			bh.mu.Lock()
			bh.conns = append(bh.conns, c)
			bh.mu.Unlock()
		}
	}()
	t.Cleanup(bh.close)
	return bh
}

func (bh *blackHole) addr() string { return bh.ln.Addr().String() }

func (bh *blackHole) close() {
	bh.ln.Close()
	<-bh.done
	bh.mu.Lock()
	for _, c := range bh.conns {
		c.Close()
	}
	bh.conns = nil
	bh.mu.Unlock()
}

// baseConfig returns a Config whose every provider is disabled or points at
// a refused loopback port, with the loopback-only dialer.
func baseConfig(t testing.TB, providers ...string) Config {
	t.Helper()
	refused := refusedAddr(t)
	return Config{
		Providers:     providers,
		Timeout:       5 * time.Second,
		EC2Endpoint:   "http://" + refused,
		GCPHost:       refused,
		AzureEndpoint: "http://" + refused,
		DialContext:   loopbackDial(t, nil),
	}
}

// ---- EC2 IMDSv2 ----

type fakeIMDS struct {
	*httptest.Server
	az, azID    string
	tokenPuts   atomic.Int64
	gets        atomic.Int64
	unauthGets  atomic.Int64
	delay       time.Duration
	handlerWrap func(http.ResponseWriter, *http.Request) bool // returns true when it answered
}

const imdsToken = "AQAEAFake-token=="

func newFakeIMDS(t testing.TB, az, azID string) *fakeIMDS {
	f := &fakeIMDS{az: az, azID: azID}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeIMDS) serve(w http.ResponseWriter, r *http.Request) {
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	if f.handlerWrap != nil && f.handlerWrap(w, r) {
		return
	}
	switch {
	case r.URL.Path == "/latest/api/token":
		if r.Method != http.MethodPut {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
		if err != nil || ttl < 1 || ttl > 21600 {
			http.Error(w, "bad ttl", http.StatusBadRequest)
			return
		}
		if r.Header.Get("X-Forwarded-For") != "" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		f.tokenPuts.Add(1)
		w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", strconv.Itoa(ttl))
		fmt.Fprint(w, imdsToken)
	case strings.HasPrefix(r.URL.Path, "/latest/meta-data/"):
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("X-aws-ec2-metadata-token") != imdsToken {
			f.unauthGets.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		f.gets.Add(1)
		switch strings.TrimPrefix(r.URL.Path, "/latest/meta-data/") {
		case "placement/availability-zone":
			fmt.Fprint(w, f.az)
		case "placement/availability-zone-id":
			fmt.Fprint(w, f.azID)
		default:
			http.NotFound(w, r)
		}
	default:
		http.NotFound(w, r)
	}
}

// ---- GCP ----

type fakeGCP struct {
	*httptest.Server
	zone        string // full "projects/.../zones/..." value
	gets        atomic.Int64
	noFlavor    atomic.Int64
	handlerWrap func(http.ResponseWriter, *http.Request) bool
}

func newFakeGCP(t testing.TB, zone string) *fakeGCP {
	f := &fakeGCP{zone: zone}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeGCP) host() string { return strings.TrimPrefix(f.URL, "http://") }

func (f *fakeGCP) serve(w http.ResponseWriter, r *http.Request) {
	f.gets.Add(1)
	if f.handlerWrap != nil && f.handlerWrap(w, r) {
		return
	}
	if r.Header.Get("Metadata-Flavor") != "Google" {
		f.noFlavor.Add(1)
		http.Error(w, "Missing required header \"Metadata-Flavor\": \"Google\"", http.StatusForbidden)
		return
	}
	w.Header().Set("Metadata-Flavor", "Google")
	switch r.URL.Path {
	case "/computeMetadata/v1/instance/zone":
		w.Header().Set("Content-Type", "application/text")
		fmt.Fprint(w, f.zone)
	default:
		http.NotFound(w, r)
	}
}

// ---- Azure ----

type fakeAzure struct {
	*httptest.Server
	location, zone string
	gets           atomic.Int64
	handlerWrap    func(http.ResponseWriter, *http.Request) bool
}

func newFakeAzure(t testing.TB, location, zone string) *fakeAzure {
	f := &fakeAzure{location: location, zone: zone}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAzure) serve(w http.ResponseWriter, r *http.Request) {
	f.gets.Add(1)
	if f.handlerWrap != nil && f.handlerWrap(w, r) {
		return
	}
	if r.Header.Get("Metadata") != "true" {
		http.Error(w, `{"error":"Bad request. Required metadata header not specified"}`, http.StatusBadRequest)
		return
	}
	if r.URL.Query().Get("api-version") == "" {
		http.Error(w, `{"error":"Bad request. api-version was not specified"}`, http.StatusBadRequest)
		return
	}
	if r.URL.Query().Get("format") != "text" {
		http.Error(w, `{"error":"Bad request. Leaf nodes need format=text"}`, http.StatusBadRequest)
		return
	}
	switch r.URL.Path {
	case "/metadata/instance/compute/location":
		fmt.Fprint(w, f.location)
	case "/metadata/instance/compute/zone":
		fmt.Fprint(w, f.zone)
	default:
		http.NotFound(w, r)
	}
}

// ---- ECS ----

type fakeECS struct {
	*httptest.Server
	taskJSON    string
	gets        atomic.Int64
	handlerWrap func(http.ResponseWriter, *http.Request) bool
}

// ecsTask is a task metadata v4 document shaped like a Fargate task's.
func ecsTask(az string) string {
	return `{
  "Cluster": "arn:aws:ecs:eu-west-1:111122223333:cluster/orders",
  "TaskARN": "arn:aws:ecs:eu-west-1:111122223333:task/orders/0a1b2c3d4e5f",
  "Family": "orders-writer",
  "Revision": "7",
  "DesiredStatus": "RUNNING",
  "KnownStatus": "RUNNING",
  "Limits": {"CPU": 0.5, "Memory": 1024},
  "PullStartedAt": "2026-11-29T10:00:00.1Z",
  "PullStoppedAt": "2026-11-29T10:00:04.2Z",
  "AvailabilityZone": "` + az + `",
  "LaunchType": "FARGATE",
  "Containers": [{"DockerId": "0a1b2c3d4e5f-1234567890", "Name": "writer", "Networks": [{"NetworkMode": "awsvpc", "IPv4Addresses": ["10.0.1.17"]}]}]
}`
}

func newFakeECS(t testing.TB, taskJSON string) *fakeECS {
	f := &fakeECS{taskJSON: taskJSON}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeECS) uri() string { return f.URL + "/v4/0a1b2c3d4e5f-1234567890" }

func (f *fakeECS) serve(w http.ResponseWriter, r *http.Request) {
	f.gets.Add(1)
	if f.handlerWrap != nil && f.handlerWrap(w, r) {
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/v4/0a1b2c3d4e5f-1234567890/task" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, f.taskJSON)
}

// ---- Kubernetes API server ----

type fakeK8s struct {
	*httptest.Server
	node        string
	labels      map[string]string
	token       string
	tokenFile   string
	caFile      string
	gets        atomic.Int64
	unauth      atomic.Int64
	handlerWrap func(http.ResponseWriter, *http.Request) bool
}

func newFakeK8s(t testing.TB, node string, labels map[string]string) *fakeK8s {
	f := &fakeK8s{node: node, labels: labels, token: "eyJhbGciOiJSUzI1NiJ9.fake.sig"}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	// Handshakes cut short by a stopped detection are expected here.
	f.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.StartTLS()
	t.Cleanup(f.Close)
	dir := t.TempDir()
	f.tokenFile = filepath.Join(dir, "token")
	f.caFile = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(f.tokenFile, []byte(f.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})
	if err := os.WriteFile(f.caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeK8s) configure(cfg *Config) {
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(f.URL, "https://"))
	cfg.KubernetesHost, cfg.KubernetesPort = host, port
	cfg.NodeName = f.node
	cfg.KubernetesTokenFile, cfg.KubernetesCAFile = f.tokenFile, f.caFile
}

func (f *fakeK8s) serve(w http.ResponseWriter, r *http.Request) {
	f.gets.Add(1)
	if f.handlerWrap != nil && f.handlerWrap(w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		f.unauth.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
		return
	}
	if r.URL.Path != "/api/v1/nodes/"+f.node {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		return
	}
	kind, api := "Node", "v1"
	if strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata") {
		kind, api = "PartialObjectMetadata", "meta.k8s.io/v1"
	}
	var labels []string
	for k, v := range f.labels {
		labels = append(labels, strconv.Quote(k)+":"+strconv.Quote(v))
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":%q,"apiVersion":%q,"metadata":{"name":%q,"uid":"5f0c-11ee","resourceVersion":"81234","labels":{%s},"annotations":{"node.alpha.kubernetes.io/ttl":"0"}}}`,
		kind, api, f.node, strings.Join(labels, ","))
}
