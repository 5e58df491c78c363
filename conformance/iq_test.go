//go:build conformance

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azkafka/azkafka/conformance/internal/kafkanode"
	"github.com/azkafka/azkafka/internal/iqinspect"
	"github.com/azkafka/azkafka/iq"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/describegroups"
)

const (
	iqStore      = "counts"
	iqPartitions = 6
	iqInstances  = 3
	iqKeyCount   = 2000
	iqMainClass  = "azkafka.conformance.StreamsFixture"
	iqMetaPath   = "/azkafka/iq/metadata"
)

// iqApp is the Kafka Streams 4.3.1 fixture run as iqInstances JVMs.
type iqApp struct {
	t         *testing.T
	bootstrap string
	appID     string
	topic     string
	protocol  string // group.protocol; "" for Kafka Streams' default
	ports     []int
	stateDirs []string
	logs      []string
	stops     []func()
}

// The fixture's topics besides the input topic (see StreamsFixture): left
// and right feed the joined and leftcount stores.
const (
	iqLeftPartitions  = 4
	iqRightPartitions = 8
	// iqRekeyPartitions is the fixture's "rekey" repartition topic's.
	iqRekeyPartitions = 5
)

func (a *iqApp) left() string  { return a.topic + "-left" }
func (a *iqApp) right() string { return a.topic + "-right" }

// createTopics creates the fixture's source topics and writes every key
// want[key] times to the input and left topics and once to right.
func (a *iqApp) createTopics(ctx context.Context, addrs []string, keys []string, want map[string]int64) {
	a.t.Helper()
	createTopic(a.t, ctx, addrs, a.topic, iqPartitions)
	createTopic(a.t, ctx, addrs, a.left(), iqLeftPartitions)
	createTopic(a.t, ctx, addrs, a.right(), iqRightPartitions)
	produceCounts(a.t, ctx, addrs, a.topic, keys, want)
	produceCounts(a.t, ctx, addrs, a.left(), keys, want)
	once := make(map[string]int64, len(keys))
	for _, k := range keys {
		once[k] = 1
	}
	produceCounts(a.t, ctx, addrs, a.right(), keys, once)
}

// iqStores are the fixture's stores, each with the key a test key k has in
// it (rekeyed counts "r-" + k).
var iqStores = []struct {
	name string
	key  func(k string) string
}{
	{iqStore, func(k string) string { return k }},
	{"rekeyed", func(k string) string { return "r-" + k }},
	{"joined", func(k string) string { return k }},
	{"leftcount", func(k string) string { return k }},
}

func (a *iqApp) url(i int, path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(a.ports[i]) + path
}

func (a *iqApp) host(i int) string { return "127.0.0.1:" + strconv.Itoa(a.ports[i]) }

// start launches instance i. The JVM is killed at the end of the test, also
// on failure: the cleanup below cancels its context and waits for the exit.
func (a *iqApp) start(i int) {
	a.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{a.bootstrap, a.appID, strconv.Itoa(a.ports[i]), a.stateDirs[i], "az-" + string(rune('a'+i)), a.topic}
	if a.protocol != "" {
		args = append(args, a.protocol)
	}
	cmd := javaCommand(a.t, ctx, "streams", iqMainClass, args...)
	f, err := os.OpenFile(a.logs[i], os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		cancel()
		a.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		cancel()
		f.Close()
		a.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit is expected (kill) or seen through HTTP
		f.Close()
		close(exited)
	}()
	stop := func() {
		cancel()
		<-exited
	}
	a.t.Cleanup(stop)
	a.stops[i] = stop
}

// kill ends instance i with SIGKILL (no leave-group, no clean shutdown) and
// waits until the process is gone.
func (a *iqApp) kill(i int) {
	a.stops[i]()
}

func (a *iqApp) dumpLogs() {
	for i, p := range a.logs {
		b, _ := os.ReadFile(p)
		a.t.Logf("instance %d (%s) log tail:\n%s", i, a.host(i), tail(b, 3000))
	}
}

func freeLoopbackPorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := kafkanode.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

func iqKeys() ([]string, map[string]int64) {
	keys := make([]string, iqKeyCount)
	want := make(map[string]int64, iqKeyCount)
	for i := range keys {
		keys[i] = fmt.Sprintf("iq-key-%04d", i)
		want[keys[i]] = int64(i%5 + 1)
	}
	return keys, want
}

// javaKeyMeta is one line of the fixture's /keymeta answer:
// KafkaStreams.queryMetadataForKey.
type javaKeyMeta struct {
	Key       string   `json:"key"`
	Partition int      `json:"partition"`
	Active    string   `json:"active"`
	Standbys  []string `json:"standbys"`
	Null      bool     `json:"null"`
}

func queryJavaKeyMeta(ctx context.Context, instanceURL, store string, keys []string) (map[string]javaKeyMeta, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, instanceURL+"/keymeta/"+store, strings.NewReader(strings.Join(keys, "\n")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("keymeta: HTTP %d: %s", resp.StatusCode, b)
	}
	out := make(map[string]javaKeyMeta, len(keys))
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var m javaKeyMeta
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("keymeta line %q: %w", sc.Text(), err)
		}
		out[m.Key] = m
	}
	return out, sc.Err()
}

// goKeyMeta renders an iq Route the way the fixture renders Java's answer.
func goKeyMeta(r iq.Route, err error) javaKeyMeta {
	m := javaKeyMeta{Partition: r.Partition, Active: "unavailable:-1", Standbys: []string{}}
	if errors.Is(err, iq.ErrUnknownStore) {
		return javaKeyMeta{Null: true}
	}
	if r.Active != nil {
		m.Active = r.Active.HostInfo.String()
	}
	for _, s := range r.Standbys {
		m.Standbys = append(m.Standbys, s.HostInfo.String())
	}
	slices.Sort(m.Standbys)
	return m
}

// valueAnswer is the fixture's /store answer.
type valueAnswer struct {
	Value     int64 `json:"value"`
	Found     bool  `json:"found"`
	Active    bool  `json:"active"`
	Partition int   `json:"partition"`
	Lag       int64 `json:"lag"`
}

// valueQuery is the QueryFunc a Go service would write for the fixture: it
// fills into and served on success.
func valueQuery(hc *http.Client, key string, stale bool, into *valueAnswer, served *iq.Replica) iq.QueryFunc {
	return func(ctx context.Context, r iq.Replica) error {
		u := "http://" + r.HostInfo.String() + "/store/" + iqStore + "/" + url.PathEscape(key) + "?stale=" + strconv.FormatBool(stale)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode == http.StatusServiceUnavailable && bytes.Contains(body, []byte(`"not_active"`)) {
			return fmt.Errorf("%s: %w", bytes.TrimSpace(body), iq.ErrNotActive)
		}
		if resp.StatusCode != http.StatusOK {
			return &iq.StatusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(body))}
		}
		if err := json.Unmarshal(body, into); err != nil {
			return fmt.Errorf("value answer %q: %w", body, err)
		}
		*served = r
		return nil
	}
}

// TestIQRoutesLikeKafkaStreams runs the Kafka Streams 4.3.1 fixture as three
// instances (count store over a 6-partition topic, one standby) and checks
// that iq routes 2,000 keys exactly as queryMetadataForKey does, keeps
// answering from standbys while an active instance is killed, gives clear
// errors in active-only mode until the tasks move, and matches again after
// the instance comes back.
func TestIQRoutesLikeKafkaStreams(t *testing.T) {
	addrs := brokers(t)
	javaProject(t, "streams") // skip (or fail under CI) before starting anything
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	app, keys, want := startIQApp(t, ctx, addrs, "")

	quiet := slog.New(slog.DiscardHandler)
	src, err := iq.NewHTTPSource([]string{app.url(0, iqMetaPath)}, iq.WithPollInterval(250*time.Millisecond),
		iq.WithPollTimeout(time.Second), iq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	src.Start()
	t.Cleanup(func() { src.Close() })
	hc := &http.Client{}
	t.Cleanup(hc.CloseIdleConnections)
	activeOnly, err := iq.NewClient(src, iq.WithAllowStandby(false), iq.WithAZ("az-a"),
		iq.WithAttemptTimeout(time.Second), iq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	stale, err := iq.NewClient(src, iq.WithAllowStandby(true), iq.WithMaxLag(10_000), iq.WithAZ("az-a"),
		iq.WithAttemptTimeout(time.Second), iq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("routes match queryMetadataForKey", func(t *testing.T) {
		matchRoutes(t, ctx, app, src, keys, []int{0, 1, 2})
		checkValues(t, ctx, hc, activeOnly, keys, want)
	})
	if t.Failed() {
		return
	}

	// Kill an instance other than the seed that is active for some keys.
	victim, affected := pickVictim(t, app, frozen(t, src), keys)

	strict, err := iq.NewClient(src, iq.WithAllowStandby(true), iq.WithMaxLag(0), iq.WithAZ("az-a"),
		iq.WithAttemptTimeout(time.Second), iq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("failover while the active instance is dead", func(t *testing.T) {
		failover(t, ctx, hc, app, src, victim, affected, want, stale, strict, activeOnly)
	})

	t.Run("routes match again after recovery", func(t *testing.T) {
		start := time.Now()
		app.start(victim)
		waitStable(t, ctx, app, []int{0, 1, 2})
		t.Logf("instance %d back, all RUNNING and caught up after %v", victim, time.Since(start).Round(time.Millisecond))
		matchRoutes(t, ctx, app, src, keys, []int{0, 1, 2})
		checkValues(t, ctx, hc, activeOnly, keys, want)
	})
}

// startIQApp creates the fixture's topics and data and starts its three
// instances (group.protocol as given; "" leaves Kafka Streams' default), and
// waits until they are stable.
func startIQApp(t *testing.T, ctx context.Context, addrs []string, protocol string) (*iqApp, []string, map[string]int64) {
	t.Helper()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	dir := t.TempDir()
	app := &iqApp{
		t: t, bootstrap: strings.Join(addrs, ","),
		appID: "azkafka-iq-" + suffix, topic: "azkafka-iq-input-" + suffix, protocol: protocol,
		ports: freeLoopbackPorts(t, iqInstances),
		stops: make([]func(), iqInstances),
	}
	for i := range iqInstances {
		app.stateDirs = append(app.stateDirs, filepath.Join(dir, fmt.Sprintf("state-%d", i)))
		app.logs = append(app.logs, filepath.Join(dir, fmt.Sprintf("instance-%d.log", i)))
	}
	t.Cleanup(func() {
		if t.Failed() {
			app.dumpLogs()
		}
	})

	keys, want := iqKeys()
	app.createTopics(ctx, addrs, keys, want)
	start := time.Now()
	for i := range iqInstances {
		app.start(i)
	}
	waitStable(t, ctx, app, []int{0, 1, 2})
	t.Logf("3 instances RUNNING with caught-up standbys after %v", time.Since(start).Round(time.Millisecond))

	return app, keys, want
}

// produceCounts writes key i want[key] times, partitioned as Java's default
// partitioner does (kafka-go's Murmur2Balancer{Consistent: true}).
func produceCounts(t *testing.T, ctx context.Context, addrs []string, topic string, keys []string, want map[string]int64) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, Balancer: kafka.Murmur2Balancer{Consistent: true},
		BatchSize: 1000, BatchTimeout: 10 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var msgs []kafka.Message
	for _, k := range keys {
		for range want[k] {
			msgs = append(msgs, kafka.Message{Key: []byte(k), Value: []byte("x")})
		}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing %d records: %v", len(msgs), err)
	}
}

// waitStable waits until every listed instance serves a valid metadata
// document in state RUNNING, all agree on the assignment, every partition
// has an active and (with two or more instances) a standby, all local lags
// are 0, the group has committed the end of every topic it reads, and that
// holds on two polls 500 ms apart.
func waitStable(t *testing.T, ctx context.Context, app *iqApp, instances []int) {
	t.Helper()
	deadline := time.Now().Add(150 * time.Second)
	var why string
	var prev string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		why, prev = stableView(ctx, app, instances, prev)
		if why == "" {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("instances %v not stable within 150s: %s", instances, why)
}

// stableView returns "" when the view is stable and equal to prev (the
// previous call's view, returned as the second result), else why not.
func stableView(ctx context.Context, app *iqApp, instances []int, prev string) (string, string) {
	var view string
	for _, i := range instances {
		u := app.url(i, iqMetaPath)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error(), ""
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d, err := parseMetaDoc(body)
		if err != nil {
			return u + ": " + err.Error(), ""
		}
		if d.State != "RUNNING" {
			return fmt.Sprintf("instance %d state %s", i, d.State), ""
		}
		if len(d.Instances) != len(instances) {
			return fmt.Sprintf("instance %d sees %d instances", i, len(d.Instances)), ""
		}
		active, standby := map[int]bool{}, map[int]bool{}
		for _, in := range d.Instances {
			for _, p := range in.ActivePartitions[app.topic] {
				active[p] = true
			}
			for _, p := range in.StandbyPartitions[app.topic] {
				standby[p] = true
			}
		}
		if len(active) != iqPartitions || (len(instances) > 1 && len(standby) != iqPartitions) {
			return fmt.Sprintf("instance %d: %d partitions active, %d standby", i, len(active), len(standby)), ""
		}
		for p, l := range d.Lags[iqStore] {
			if l.Lag != 0 {
				return fmt.Sprintf("instance %d partition %s lag %d", i, p, l.Lag), ""
			}
		}
		b, _ := json.Marshal(d.Instances)
		if view == "" {
			view = string(b)
		} else if view != string(b) {
			return fmt.Sprintf("instance %d disagrees on the assignment", i), ""
		}
	}
	if view != prev {
		return "assignment just changed", view
	}
	// Lags of 0 say the standbys hold what the actives wrote to the
	// changelogs, not that the actives have processed every input record:
	// on a loaded machine an active can still be counting. The group's
	// committed offsets (every 100 ms in the fixture) at the end of every
	// topic it reads say it has.
	if why := app.inputBehind(ctx); why != "" {
		return why, view
	}
	return "", view
}

// inputBehind returns "" when the application's group has committed the
// end offset of every partition of the topics it reads (input, left,
// right and the rekey repartition topic), else what is behind.
func (a *iqApp) inputBehind(ctx context.Context) string {
	topics := map[string]int{a.topic: iqPartitions, a.left(): iqLeftPartitions, a.right(): iqRightPartitions,
		a.appID + "-rekey-repartition": iqRekeyPartitions}
	cl := &kafka.Client{Addr: kafka.TCP(strings.Split(a.bootstrap, ",")...), Timeout: 5 * time.Second}
	req := map[string][]int{}
	ends := map[string][]kafka.OffsetRequest{}
	for topic, n := range topics {
		for p := range n {
			req[topic] = append(req[topic], p)
			ends[topic] = append(ends[topic], kafka.LastOffsetOf(p))
		}
	}
	end, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: ends})
	if err != nil {
		return "ListOffsets: " + err.Error()
	}
	committed, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: a.appID, Topics: req})
	if err != nil {
		return "OffsetFetch: " + err.Error()
	}
	if committed.Error != nil {
		return "OffsetFetch: " + committed.Error.Error()
	}
	for topic, n := range topics {
		if len(committed.Topics[topic]) != n {
			return fmt.Sprintf("group %s: committed offsets of %d of %d partitions of %s", a.appID, len(committed.Topics[topic]), n, topic)
		}
		last := map[int]int64{}
		for _, po := range end.Topics[topic] {
			last[po.Partition] = po.LastOffset
		}
		for _, po := range committed.Topics[topic] {
			if a.protocol == "streams" && topic == a.right() && po.Partition >= iqLeftPartitions {
				// On 4.3.1's streams protocol these partitions are in no
				// task (the subtopology gets the smaller topic's count,
				// KAFKA-20885): nothing ever consumes them.
				continue
			}
			if po.Error != nil {
				return fmt.Sprintf("OffsetFetch %s partition %d: %v", topic, po.Partition, po.Error)
			}
			if last[po.Partition] > 0 && po.CommittedOffset != last[po.Partition] {
				return fmt.Sprintf("group %s has committed %s partition %d up to %d of %d", a.appID, topic, po.Partition, po.CommittedOffset, last[po.Partition])
			}
		}
	}
	return ""
}

// pickVictim returns the first of instances 1 and 2 (never the seed, 0)
// that snap routes some of keys of store iqStore to as active, and those
// keys.
func pickVictim(t *testing.T, app *iqApp, snap *iq.Client, keys []string) (int, []string) {
	t.Helper()
	for _, v := range []int{1, 2} {
		var affected []string
		for _, k := range keys {
			if r, err := snap.Route(iqStore, []byte(k)); err == nil && r.Active.HostInfo.String() == app.host(v) {
				affected = append(affected, k)
			}
		}
		if len(affected) > 0 {
			return v, affected
		}
	}
	t.Fatal("neither instance 1 nor 2 is active for any key")
	return -1, nil
}

// frozen returns a Client that routes with src's metadata as it is now,
// so that a comparison over many keys sees one view.
func frozen(t *testing.T, src *iq.Source) *iq.Client {
	t.Helper()
	md, ok := src.Metadata()
	if !ok {
		t.Fatal("the source has no metadata yet")
	}
	return staticClient(t, md)
}

// staticClient returns a Client that routes with md, and no settings
// from the environment.
func staticClient(t *testing.T, md iq.Metadata) *iq.Client {
	t.Helper()
	static, err := iq.NewStaticSource(md)
	if err != nil {
		t.Fatal(err)
	}
	c, err := iq.NewClient(static, iq.WithLookupEnv(func(string) (string, bool) { return "", false }), iq.WithAZ(""))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// metaDoc is the part of the metadata document (see package iq's doc) the
// suite reads from the Java handler itself, decoded here on its own.
type metaDoc struct {
	State     string `json:"state"`
	Instances []struct {
		ActivePartitions  map[string][]int `json:"activePartitions"`
		StandbyPartitions map[string][]int `json:"standbyPartitions"`
	} `json:"instances"`
	Lags map[string]map[string]struct {
		Lag int64 `json:"lag"`
	} `json:"lags"`
}

func parseMetaDoc(body []byte) (*metaDoc, error) {
	var d metaDoc
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("metadata document: %w", err)
	}
	return &d, nil
}

// metadataOf returns src's current metadata.
func metadataOf(t *testing.T, src *iq.Source) iq.Metadata {
	t.Helper()
	md, ok := src.Metadata()
	if !ok {
		t.Fatal("the source has no metadata yet")
	}
	return md
}

// matchRoutes compares iq's Route with every instance's queryMetadataForKey
// for all keys of store iqStore; see matchStoreRoutes.
func matchRoutes(t *testing.T, ctx context.Context, app *iqApp, src *iq.Source, keys []string, instances []int) {
	t.Helper()
	matchStoreRoutes(t, ctx, app, src, iqStore, keys, instances)
}

// matchStoreRoutes compares iq's Route with every instance's
// queryMetadataForKey for all keys of store; a round is retried if Java's
// answer changed meanwhile.
func matchStoreRoutes(t *testing.T, ctx context.Context, app *iqApp, src *iq.Source, store string, keys []string, instances []int) {
	t.Helper()
	start := time.Now()
	for round := 1; ; round++ {
		before := map[int]map[string]javaKeyMeta{}
		for _, i := range instances {
			m, err := queryJavaKeyMeta(ctx, app.url(i, ""), store, keys)
			if err != nil {
				t.Fatalf("instance %d: %v", i, err)
			}
			before[i] = m
		}
		for range 2 { // the second poll sees the peers discovered by the first
			if err := src.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		snap := frozen(t, src)
		changed := false
		for _, i := range instances {
			after, err := queryJavaKeyMeta(ctx, app.url(i, ""), store, keys)
			if err != nil {
				t.Fatalf("instance %d: %v", i, err)
			}
			for _, k := range keys {
				if fmt.Sprint(after[k]) != fmt.Sprint(before[i][k]) {
					changed = true
				}
			}
		}
		if changed && round < 5 {
			t.Logf("round %d: Java's answer changed while comparing (rebalance); again", round)
			time.Sleep(time.Second)
			continue
		}
		compared, matched := 0, 0
		var diffs []string
		for _, i := range instances {
			for _, k := range keys {
				j := before[i][k]
				g := goKeyMeta(snap.Route(store, []byte(k)))
				g.Key = k
				compared++
				if fmt.Sprint(g) == fmt.Sprint(j) {
					matched++
				} else if len(diffs) < 5 {
					diffs = append(diffs, fmt.Sprintf("key %q: Java (instance %d) %+v, iq %+v", k, i, j, g))
				}
			}
		}
		t.Logf("%T store %s: Route vs queryMetadataForKey: %d/%d match (%.2f%%) over %d keys x %d instances (%v)",
			src, store, matched, compared, 100*float64(matched)/float64(compared), len(keys), len(instances), time.Since(start).Round(time.Millisecond))
		if matched != compared {
			t.Errorf("store %s mismatches:\n%s", store, strings.Join(diffs, "\n"))
		}
		return
	}
}

// checkValues queries every key active-only and checks its count.
func checkValues(t *testing.T, ctx context.Context, hc *http.Client, c *iq.Client, keys []string, want map[string]int64) {
	t.Helper()
	start := time.Now()
	bad := 0
	for _, k := range keys {
		var v valueAnswer
		var served iq.Replica
		err := c.Query(ctx, iqStore, []byte(k), valueQuery(hc, k, false, &v, &served))
		if err != nil || v.Value != want[k] || !v.Active {
			if bad < 5 {
				t.Errorf("key %q: value %+v from %s, err %v; want %d from the active", k, v, served.HostInfo, err, want[k])
			}
			bad++
		}
	}
	t.Logf("active-only Query: %d/%d keys answered with the right count (%v)", len(keys)-bad, len(keys), time.Since(start).Round(time.Millisecond))
}

// failover kills victim and queries its keys with three clients (standbys
// allowed within the default max lag, within max lag 0, active only) until
// the active-only client succeeds again (tasks reassigned), then reports.
// A wrong count is allowed only from a replica that reported a lag.
func failover(t *testing.T, ctx context.Context, hc *http.Client, app *iqApp, src *iq.Source, victim int,
	affected []string, want map[string]int64, stale, strict, activeOnly *iq.Client) {
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		staleOK, staleFail, staleFromStandby, staleWrong int
		maxServedLag                                     int64
		activeOK, activeFail                             int
		unclear                                          int
		reasons                                          = map[string]int{}
		example                                          string
		reassignedAfter                                  time.Duration
		okRounds                                         int
		wrongExamples                                    []string
		unexplained                                      int
		strictOK, strictFail, strictWrong                int
	)
	const batch = 30
	killedAt := time.Now()
	app.kill(victim)
	t.Logf("killed instance %d (%s), active for %d of the %d keys", victim, app.host(victim), len(affected), iqKeyCount)
	deadline := killedAt.Add(120 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		roundActiveFail := 0
		for range batch {
			k := affected[rng.IntN(len(affected))]
			var v valueAnswer
			var served iq.Replica
			if err := stale.Query(ctx, iqStore, []byte(k), valueQuery(hc, k, true, &v, &served)); err != nil {
				staleFail++
				reasons["stale: "+classify(err)]++
			} else {
				staleOK++
				if !served.Active {
					staleFromStandby++
				}
				if !v.Found || v.Value != want[k] {
					staleWrong++
					if !(served.LagKnown && served.Lag.Lag > 0) && v.Lag <= 0 {
						unexplained++
					}
					if len(wrongExamples) < 8 {
						wrongExamples = append(wrongExamples, fmt.Sprintf("%s at %v: got %d (found %v) want %d from %s (iq role active=%v, lag known %v %d; host says active=%v, lag %d)",
							k, time.Since(killedAt).Round(time.Millisecond), v.Value, v.Found, want[k], served.HostInfo, served.Active, served.LagKnown, served.Lag.Lag, v.Active, v.Lag))
					}
				}
				maxServedLag = max(maxServedLag, v.Lag)
			}
			v = valueAnswer{}
			if err := strict.Query(ctx, iqStore, []byte(k), valueQuery(hc, k, true, &v, &served)); err != nil {
				strictFail++
			} else {
				strictOK++
				if !v.Found || v.Value != want[k] {
					strictWrong++
				}
			}
			v = valueAnswer{}
			err := activeOnly.Query(ctx, iqStore, []byte(k), valueQuery(hc, k, false, &v, &served))
			if err != nil {
				activeFail++
				roundActiveFail++
				reasons["active-only: "+classify(err)]++
				if example == "" {
					example = err.Error()
				}
				var qe *iq.QueryError
				if !errors.As(err, &qe) || (len(qe.Attempts) == 0 && !errors.Is(err, iq.ErrNotAvailable)) {
					unclear++
				}
			} else {
				activeOK++
				if v.Value != want[k] {
					t.Errorf("active-only read of %q returned %d, want %d", k, v.Value, want[k])
				}
			}
		}
		if roundActiveFail == 0 && activeFail > 0 {
			if reassignedAfter == 0 {
				reassignedAfter = time.Since(killedAt)
			}
			if okRounds++; okRounds == 3 {
				break
			}
		} else {
			okRounds = 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	staleTotal := staleOK + staleFail
	t.Logf("during the rebalance (%v observed): standby-allowed Query %d/%d succeeded (%.1f%%), %d served by a standby, %d wrong or missing counts, max lag reported by a serving replica %d offsets",
		time.Since(killedAt).Round(time.Millisecond), staleOK, staleTotal, 100*float64(staleOK)/float64(staleTotal), staleFromStandby, staleWrong, maxServedLag)
	t.Logf("active-only Query: %d/%d succeeded; tasks reassigned (active-only answering again) %v after the kill", activeOK, activeOK+activeFail, reassignedAfter.Round(time.Millisecond))
	t.Logf("failure reasons: %v", reasons)
	t.Logf("example active-only error: %s", example)
	if reassignedAfter == 0 {
		t.Fatalf("active-only queries never recovered within 120s (failures %d)", activeFail)
	}
	if activeFail == 0 {
		t.Error("active-only mode never failed although the active instance was killed")
	}
	if unclear > 0 {
		t.Errorf("%d active-only errors were not a *iq.QueryError naming a host", unclear)
	}
	if rate := float64(staleOK) / float64(staleTotal); rate < 0.95 {
		t.Errorf("standby-allowed success rate %.1f%% < 95%%", 100*rate)
	}
	t.Logf("standby-allowed with max lag 0: %d/%d succeeded (%.1f%%), %d wrong or missing counts",
		strictOK, strictOK+strictFail, 100*float64(strictOK)/float64(max(1, strictOK+strictFail)), strictWrong)
	if staleWrong > 0 {
		t.Logf("stale answers (allowed: the serving replica's lag was within max lag):\n%s", strings.Join(wrongExamples, "\n"))
	}
	if unexplained > 0 {
		t.Errorf("%d stale reads returned a wrong count from a replica that reported lag 0", unexplained)
	}
}

// classify names the cause of a Query error for the report.
func classify(err error) string {
	var qe *iq.QueryError
	switch {
	case errors.Is(err, iq.ErrNoReplica):
		return "no eligible replica"
	case errors.Is(err, iq.ErrNotAvailable):
		return "not available"
	case errors.As(err, &qe) && len(qe.Attempts) > 0:
		last := qe.Attempts[len(qe.Attempts)-1].Err
		switch {
		case errors.Is(last, iq.ErrNotActive):
			return "host not active"
		case strings.Contains(last.Error(), "connection refused"):
			return "connection refused"
		case errors.Is(last, context.DeadlineExceeded):
			return "timeout"
		}
		return "other: " + last.Error()
	}
	return "other: " + err.Error()
}

// storeKeys returns the test keys as they are in store.
func storeKeys(keys []string, key func(string) string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = key(k)
	}
	return out
}

// TestIQClusterSource runs the fixture with its four stores on the classic
// protocol and checks: the metadata handler routes every store as
// queryMetadataForKey does (a store fed by part of its subtopology's
// topics included); the cluster source, with no Java-side code, routes the
// stores the group can map exactly as Java does and refuses, naming the way
// out, the two it cannot; with WithStoreTopics it routes all four; zones
// come from client.rack or the az client tag; its standby lag bound is at
// least the lag each instance reports; and after kill -9 of an instance it
// shows the move, measured against the HTTP source.
func TestIQClusterSource(t *testing.T) {
	addrs := brokers(t)
	javaProject(t, "streams")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	app, keys, want := startIQApp(t, ctx, addrs, "classic")
	quiet := slog.New(slog.DiscardHandler)

	httpSrc, err := iq.NewHTTPSource([]string{app.url(0, iqMetaPath)}, iq.WithPollInterval(250*time.Millisecond),
		iq.WithPollTimeout(time.Second), iq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer httpSrc.Close()
	t.Run("metadata handler routes every store like Java", func(t *testing.T) {
		for _, st := range iqStores {
			matchStoreRoutes(t, ctx, app, httpSrc, st.name, storeKeys(keys, st.key), []int{0, 1, 2})
		}
	})
	t.Run("the fixture tells the old handler rule apart", func(t *testing.T) {
		// Routing leftcount on every source of its subtopology, as the
		// handler once did, must disagree with Java for many keys.
		md := metadataOf(t, httpSrc)
		md.StoreSourceTopics["leftcount"] = []string{app.left(), app.right()}
		md.TopicPartitions[app.right()] = iqRightPartitions
		old := staticClient(t, md)
		java, err := queryJavaKeyMeta(ctx, app.url(0, ""), "leftcount", keys)
		if err != nil {
			t.Fatal(err)
		}
		wrong := 0
		for _, k := range keys {
			g := goKeyMeta(old.Route("leftcount", []byte(k)))
			g.Key = k
			if fmt.Sprint(g) != fmt.Sprint(java[k]) {
				wrong++
			}
		}
		t.Logf("leftcount routed on [left right] (the old rule): %d of %d keys disagree with queryMetadataForKey", wrong, len(keys))
		if wrong == 0 {
			t.Error("the old rule agrees with Java: the fixture cannot tell the rules apart")
		}
	})

	plain, err := iq.NewClusterSource(addrs, app.appID, iq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	t.Run("cluster source routes what the group tells", func(t *testing.T) {
		for _, st := range iqStores[:2] {
			matchStoreRoutes(t, ctx, app, plain, st.name, storeKeys(keys, st.key), []int{0, 1, 2})
		}
		for _, st := range iqStores[2:] {
			_, err := frozen(t, plain).Route(st.name, []byte(keys[0]))
			if !errors.Is(err, iq.ErrStoreTopicsUnknown) || !strings.Contains(err.Error(), "iq.WithStoreTopics(") {
				t.Errorf("store %s: %v; want ErrStoreTopicsUnknown naming WithStoreTopics", st.name, err)
			}
			t.Logf("store %s: %v", st.name, err)
		}
		g := iqinspect.GroupOf(plain)
		t.Logf("group %s: protocol %s, state %s, %d members, store subtopologies %v", g.ApplicationID, g.Protocol, g.State, len(g.Members), g.StoreSubtopology)
	})

	cluster, err := iq.NewClusterSource(addrs, app.appID, iq.WithLogger(quiet), iq.WithPollInterval(250*time.Millisecond),
		iq.WithStoreTopics("joined", app.left(), app.right()), iq.WithStoreTopics("leftcount", app.left()))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	t.Run("cluster source with WithStoreTopics routes every store like Java", func(t *testing.T) {
		for _, st := range iqStores {
			matchStoreRoutes(t, ctx, app, cluster, st.name, storeKeys(keys, st.key), []int{0, 1, 2})
		}
	})
	t.Run("capture a member's bytes", func(t *testing.T) {
		// The bytes of one member as DescribeGroups returns them, for
		// iq/internal/wire/wiretest: the decoders' tests read what Kafka
		// Streams wrote.
		tr := &kafka.Transport{}
		defer tr.CloseIdleConnections()
		m, err := tr.RoundTrip(ctx, kafka.TCP(addrs...), &describegroups.Request{Groups: []string{app.appID}})
		if err != nil {
			t.Fatal(err)
		}
		g := m.(*describegroups.Response).Groups[0]
		member := slices.MinFunc(g.Members, func(a, b describegroups.ResponseGroupMember) int { return strings.Compare(a.MemberID, b.MemberID) })
		t.Logf("application.id %s, state %s, protocol %s/%s, member %s\nmetadata %x\nassignment %x",
			app.appID, g.GroupState, g.ProtocolType, g.ProtocolData, member.MemberID, member.MemberMetadata, member.MemberAssignment)
	})
	t.Run("azkafka iq describe and route", func(t *testing.T) {
		bootstrap := strings.Join(addrs, ",")
		for _, args := range [][]string{
			{"iq", "describe", "--bootstrap", bootstrap, "--application-id", app.appID},
			{"iq", "route", "--bootstrap", bootstrap, "--application-id", app.appID, "--store", "leftcount",
				"--store-topics", "leftcount=" + app.left(), "--allow-standby", "--az", "az-b", keys[7]},
		} {
			cmd := exec.CommandContext(ctx, "go", append([]string{"run", "../cmd/azkafka"}, args...)...)
			out, err := cmd.CombinedOutput()
			t.Logf("$ azkafka %s\n%s", strings.Join(args, " "), out)
			if err != nil {
				t.Errorf("azkafka %v: %v", args, err)
			}
		}
	})
	t.Run("routes lead to the data", func(t *testing.T) {
		for _, st := range iqStores {
			checkWhereData(t, ctx, app, cluster, st.name, storeKeys(keys, st.key))
		}
	})
	if t.Failed() {
		return
	}

	t.Run("zones from client.rack, else the az client tag", func(t *testing.T) {
		got := map[string]string{}
		for _, in := range metadataOf(t, cluster).Instances {
			got[in.HostInfo.String()] = in.AZ
		}
		for i := range iqInstances {
			if w := "az-" + string(rune('a'+i)); got[app.host(i)] != w {
				t.Errorf("instance %s: AZ %q, want %q", app.host(i), got[app.host(i)], w)
			}
		}
	})

	t.Run("poll cycle wall time", func(t *testing.T) {
		const n = 20
		start := time.Now()
		for range n {
			if err := cluster.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("cluster source poll (DescribeGroups + Metadata + ListOffsets, 3 instances x 3 threads, 4 stores): %v per poll over %d polls",
			(time.Since(start) / n).Round(10*time.Microsecond), n)
	})

	t.Run("lag bound is at least the reported lag", func(t *testing.T) {
		lagBoundCheck(t, ctx, app, addrs, cluster, keys)
	})

	t.Run("kill -9: routing moves", func(t *testing.T) {
		killMove(t, ctx, app, httpSrc, cluster, keys, want)
	})
}

// lagBoundCheck writes to the input topic while sampling, for each standby
// copy, the lag its instance reports (allLocalStorePartitionLags) and then
// the cluster source's bound; the bound must be at least the lag.
func lagBoundCheck(t *testing.T, ctx context.Context, app *iqApp, addrs []string, cluster *iq.Source, keys []string) {
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: app.topic, Balancer: kafka.Murmur2Balancer{Consistent: true},
			BatchSize: 50, BatchTimeout: 5 * time.Millisecond}
		defer w.Close()
		for i := 0; pctx.Err() == nil; i++ {
			k := "lag-" + keys[i%len(keys)]
			_ = w.WriteMessages(pctx, kafka.Message{Key: []byte(k), Value: []byte("x")})
		}
	}()
	defer func() { stop(); <-done }()
	compared, positive, violations := 0, 0, 0
	var maxLag, maxBound int64
	for sample := 0; sample < 30 && ctx.Err() == nil; sample++ {
		reported := map[string]map[string]map[int]int64{} // host, store, partition
		for i := range iqInstances {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, app.url(i, iqMetaPath), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			d, err := parseMetaDoc(body)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]map[int]int64{}
			for store, ls := range d.Lags {
				m[store] = map[int]int64{}
				for ps, l := range ls {
					p, _ := strconv.Atoi(ps)
					m[store][p] = l.Lag
				}
			}
			reported[app.host(i)] = m
		}
		if err := cluster.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		for _, in := range metadataOf(t, cluster).Instances {
			for store, ls := range in.Lags {
				for p, l := range ls {
					r, ok := reported[in.HostInfo.String()][store][p]
					if !ok {
						continue
					}
					compared++
					if r > 0 {
						positive++
					}
					maxLag, maxBound = max(maxLag, r), max(maxBound, l.Lag)
					if !l.Bound || l.Lag < r {
						violations++
						if violations <= 5 {
							t.Errorf("%s %s-%d: bound %+v below the reported lag %d", in.HostInfo, store, p, l, r)
						}
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("lag bound vs reported standby lag: %d comparisons (%d with a reported lag > 0, max %d; max bound %d), %d below",
		compared, positive, maxLag, maxBound, violations)
	if compared == 0 {
		t.Error("no standby lag compared")
	}
}

// killMove kills an instance that is active for some keys of iqStore and
// measures how long each source takes to stop routing to it, while a client
// on the cluster source queries the affected keys (active only).
func killMove(t *testing.T, ctx context.Context, app *iqApp, httpSrc *iq.Source, cluster *iq.Source, keys []string, want map[string]int64) {
	httpSrc.Start()
	cluster.Start()
	victim, affected := pickVictim(t, app, frozen(t, cluster), keys)
	quiet := slog.New(slog.DiscardHandler)
	client, err := iq.NewClient(cluster, iq.WithAllowStandby(false), iq.WithAZ("az-a"),
		iq.WithAttemptTimeout(time.Second), iq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	routesTo := func(src *iq.Source) bool {
		s, ok := src.Metadata()
		if !ok {
			return false
		}
		c := staticClient(t, s)
		for _, k := range affected {
			if r, err := c.Route(iqStore, []byte(k)); err == nil && r.Active.HostInfo.String() == app.host(victim) {
				return true
			}
		}
		return false
	}
	killedAt := time.Now()
	app.kill(victim)
	var httpMoved, clusterMoved time.Duration
	ok, failed, wrong := 0, 0, 0
	reasons := map[string]int{}
	rng := rand.New(rand.NewPCG(3, 4))
	for time.Since(killedAt) < 120*time.Second && ctx.Err() == nil {
		if httpMoved == 0 && !routesTo(httpSrc) {
			httpMoved = time.Since(killedAt)
		}
		if clusterMoved == 0 && !routesTo(cluster) {
			clusterMoved = time.Since(killedAt)
		}
		k := affected[rng.IntN(len(affected))]
		var v valueAnswer
		var served iq.Replica
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := client.Query(qctx, iqStore, []byte(k), valueQuery(hc, k, false, &v, &served))
		cancel()
		switch {
		case err != nil:
			failed++
			reasons[classify(err)]++
		case v.Value != want[k]:
			wrong++
		default:
			ok++
		}
		if httpMoved > 0 && clusterMoved > 0 && ok > 20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("after kill -9 of %s: HTTP source stopped routing to it after %v, cluster source after %v", app.host(victim),
		httpMoved.Round(time.Millisecond), clusterMoved.Round(time.Millisecond))
	t.Logf("active-only queries on the cluster source meanwhile: %d answered, %d failed with an error (%v), %d wrong", ok, failed, reasons, wrong)
	if clusterMoved == 0 {
		t.Error("the cluster source never stopped routing to the killed instance")
	}
	if wrong > 0 {
		t.Errorf("%d wrong answers", wrong)
	}
}

// whereKeys asks instance i which of its local partitions of store (active
// or standby) hold each key: where the data really is.
func whereKeys(ctx context.Context, app *iqApp, i int, store string, keys []string) (map[string][]int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, app.url(i, "/where/"+store), strings.NewReader(strings.Join(keys, "\n")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("where: HTTP %d: %s", resp.StatusCode, b)
	}
	out := make(map[string][]int, len(keys))
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var w struct {
			Key        string `json:"key"`
			Partitions []int  `json:"partitions"`
		}
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			return nil, fmt.Errorf("where line %q: %w", sc.Text(), err)
		}
		out[w.Key] = w.Partitions
	}
	return out, sc.Err()
}

// TestIQClusterSourceStreamsProtocol runs the fixture with
// group.protocol=streams (KIP-1071) and checks the cluster source against
// where each key's data really is: the route's partition must hold the key
// on the active instance and on every standby. Java's own
// queryMetadataForKey is compared with the same ground truth and reported.
func TestIQClusterSourceStreamsProtocol(t *testing.T) {
	addrs := brokers(t)
	javaProject(t, "streams")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	app, keys, _ := startIQApp(t, ctx, addrs, "streams")
	quiet := slog.New(slog.DiscardHandler)

	plain, err := iq.NewClusterSource(addrs, app.appID, iq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	g := iqinspect.GroupOf(plain)
	t.Logf("group %s: protocol %s, state %s, %d members, store subtopologies %v", g.ApplicationID, g.Protocol, g.State, len(g.Members), g.StoreSubtopology)
	if g.Protocol != "streams" {
		t.Fatalf("protocol %q, want streams", g.Protocol)
	}
	for _, st := range iqStores[2:] {
		_, err := frozen(t, plain).Route(st.name, []byte(keys[0]))
		if !errors.Is(err, iq.ErrStoreTopicsUnknown) {
			t.Errorf("store %s: %v; want ErrStoreTopicsUnknown", st.name, err)
		}
	}
	cluster, err := iq.NewClusterSource(addrs, app.appID, iq.WithLogger(quiet),
		iq.WithStoreTopics("joined", app.left(), app.right()), iq.WithStoreTopics("leftcount", app.left()))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()

	for _, st := range iqStores {
		t.Run("store "+st.name, func(t *testing.T) {
			checkWhereData(t, ctx, app, cluster, st.name, storeKeys(keys, st.key))
		})
	}
}

// checkWhereData checks src's routes of store against where each key's
// data is: the routed partition must hold the key on the active instance
// and on every standby. Java's queryMetadataForKey is measured the same way
// and reported. For joined, a merge of topics of different partition counts
// spreads a key over two tasks, so the routed partition holding the key is
// not the truth; Java's routing is, by design, and Go must equal it.
func checkWhereData(t *testing.T, ctx context.Context, app *iqApp, src *iq.Source, store string, skeys []string) {
	t.Helper()
	protocol := app.protocol
	if protocol == "" {
		protocol = "classic"
	}
	// A standby that was just assigned is still restoring: measure again,
	// up to 15 times a second apart, until the routes lead to the data.
	var goWrong, javaWrong, agree, round int
	var examples []string
	for round = 1; ; round++ {
		goWrong, javaWrong, agree, examples = measureWhereData(t, ctx, app, src, store, skeys, protocol)
		done := goWrong == 0
		if store == "joined" {
			done = agree == len(skeys)
		}
		if done || round == 15 {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("store %s (%s protocol, round %d): the route's partition lacks the key on a replica for %d of %d keys (Go), %d (Java's queryMetadataForKey); Go and Java agree on %d",
		store, protocol, round, goWrong, len(skeys), javaWrong, agree)
	if store == "joined" {
		if agree != len(skeys) {
			t.Errorf("joined: Go and Java agree on %d of %d keys", agree, len(skeys))
		}
		if goWrong > 0 {
			t.Logf("joined, keys not where Java and Go route them, e.g.:\n%s", strings.Join(examples, "\n"))
		}
		return
	}
	if goWrong > 0 {
		t.Errorf("examples:\n%s", strings.Join(examples, "\n"))
	}
}

// measureWhereData is one round of checkWhereData.
func measureWhereData(t *testing.T, ctx context.Context, app *iqApp, src *iq.Source, store string, skeys []string, protocol string) (goWrong, javaWrong, agree int, examples []string) {
	t.Helper()
	if err := src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	snap := frozen(t, src)
	where := map[string]map[string][]int{}
	for i := range iqInstances {
		w, err := whereKeys(ctx, app, i, store, skeys)
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		where[app.host(i)] = w
	}
	holds := func(host, key string, p int) bool { return slices.Contains(where[host][key], p) }
	java, err := queryJavaKeyMeta(ctx, app.url(0, ""), store, skeys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range skeys {
		r, err := snap.Route(store, []byte(k))
		ok := err == nil && holds(r.Active.HostInfo.String(), k, r.Partition)
		for _, s := range r.Standbys {
			ok = ok && holds(s.HostInfo.String(), k, r.Partition)
			if s.LagKnown && protocol == "streams" {
				t.Fatalf("%s: standby lag known on the streams protocol: %+v", k, s.Lag)
			}
		}
		if !ok {
			goWrong++
			if len(examples) < 5 {
				at := map[string][]int{}
				for h, w := range where {
					at[h] = w[k]
				}
				examples = append(examples, fmt.Sprintf("key %q: route partition %d active %v standbys %v (%v); data at %v",
					k, r.Partition, r.Active, r.Standbys, err, at))
			}
		}
		j := java[k]
		jok := !j.Null && holds(j.Active, k, j.Partition)
		for _, s := range j.Standbys {
			jok = jok && holds(s, k, j.Partition)
		}
		if !jok {
			javaWrong++
		}
		if g := goKeyMeta(r, err); g.Partition == j.Partition && g.Active == j.Active && fmt.Sprint(g.Standbys) == fmt.Sprint(j.Standbys) {
			agree++
		}
	}
	return goWrong, javaWrong, agree, examples
}
