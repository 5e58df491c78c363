//go:build conformance

package conformance

// Exactly once on Kafka 4.3.1: sdk.Processor's consume-transform-produce
// through members closed and restarted while the input is written, and
// sdk.TxnWriter fencing its predecessor; read_committed readers see every
// input's output once, read_uncommitted ones also what was aborted.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/eostest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/internal/testkit/logwatch"
	"github.com/azkafka/azkafka/sdk"
)

// eosInput is the input of the exactly-once tests: n messages in parts
// partitions, keys keys.
const eosParts, eosKeys = 6, 97

// eosTopics creates the input and output topics of an exactly-once test,
// eosParts partitions each, named after prefix and the time, and returns
// them with a group name of the same stamp.
func eosTopics(t *testing.T, ctx context.Context, addrs []string, prefix string) (in, out, group string) {
	t.Helper()
	stamp := time.Now().UnixNano()
	in, out, group = fmt.Sprintf("%s-in-%d", prefix, stamp), fmt.Sprintf("%s-out-%d", prefix, stamp), fmt.Sprintf("%s-%d", prefix, stamp)
	createTopic(t, ctx, addrs, in, eosParts)
	createTopic(t, ctx, addrs, out, eosParts)
	return in, out, group
}

// startProcessor starts a Processor of group with transactional ID id
// running eostest.Job from in to out; done gets Run's error.
func startProcessor(t *testing.T, ctx context.Context, addrs []string, group, in, out, id string) (*sdk.Processor, chan error) {
	t.Helper()
	p, err := sdk.NewProcessor(kafka.ReaderConfig{Brokers: addrs, GroupID: group, Topic: in, MaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 300 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second},
		&kafka.Writer{Topic: out, Balancer: &kafka.Hash{}}, controlsOptions(sdk.WithTransactionalID(id))...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, eostest.Job) }()
	return p, done
}

// TestSDKProcessorMembersComeAndGo: 3 Processors in one group, one of
// them closed and restarted with its transactional ID every 300 ms (20
// times, each a rebalance and an abort of what was open) while 20,000
// messages are written: read_committed sees each input's output once, in
// the input's order per key.
func TestSDKProcessorMembersComeAndGo(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	in, out, group := eosTopics(t, ctx, addrs, "azkafka-eos")
	const n, restarts = 20000, 20
	input := writeEosInput(ctx, addrs, in, 0, n, nil)
	type member struct {
		p    *sdk.Processor
		done chan error
	}
	members := make([]member, 3)
	for i := range members {
		p, done := startProcessor(t, ctx, addrs, group, in, out, fmt.Sprintf("%s-%d", group, i))
		members[i] = member{p, done}
	}
	defer func() {
		for _, m := range members {
			m.p.Close()
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	var aborted int64
	for range restarts {
		time.Sleep(300 * time.Millisecond)
		i := rng.IntN(len(members))
		members[i].p.Close()
		if err := <-members[i].done; err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("member %d's Run: %v", i, err)
		}
		aborted += members[i].p.Stats().Aborted["close"]
		p, done := startProcessor(t, ctx, addrs, group, in, out, fmt.Sprintf("%s-%d", group, i))
		members[i] = member{p, done}
	}
	if w := <-input; w.err != nil {
		t.Fatal(w.err)
	}
	for {
		got, done := committedOutput(t, ctx, addrs, out, n)
		if done {
			break
		}
		for i, m := range members {
			select {
			case err := <-m.done:
				t.Fatalf("member %d's Run ended: %v", i, err)
			default:
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the output has %d of %d messages", eostest.Count(got), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	all, err := eostest.ReadToEnd(ctx, addrs, out, eosParts, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d inputs, %d restarts (%d transactions aborted by Close): read_committed saw each output once; read_uncommitted %d, %d of them aborted",
		n, restarts, aborted, eostest.Count(all), eostest.Count(all)-n)
}

// TestSDKTxnWriterFenced: a TxnWriter started with the transactional ID
// of one mid-transaction fences it: the first's Commit fails with
// ErrTxnFenced and nothing of its transaction is visible read_committed.
func TestSDKTxnWriterFenced(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-txn-fence-%d", time.Now().UnixNano())
	createTopic(t, ctx, addrs, topic, 1)
	newW := func() *sdk.TxnWriter {
		w, err := sdk.NewTxnWriter(&kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic}, controlsOptions(sdk.WithTransactionalID(topic))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	zombie := newW()
	if err := zombie.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.WriteMessages(ctx, kafka.Message{Value: []byte("out-0")}); err != nil {
		t.Fatal(err)
	}
	next := newW()
	if err := zombie.Commit(ctx); !errors.Is(err, sdk.ErrTxnFenced) {
		t.Fatalf("the fenced writer's Commit: %v, want ErrTxnFenced", err)
	}
	if err := next.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := next.WriteMessages(ctx, kafka.Message{Value: []byte("out-1")}); err != nil {
		t.Fatal(err)
	}
	if err := next.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := eostest.ReadToEnd(ctx, addrs, topic, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0], []string{"out-1"}) {
		t.Errorf("read_committed: %v, want [out-1]", got[0])
	}
	all, err := eostest.ReadToEnd(ctx, addrs, topic, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(all[0], "out-0") {
		t.Errorf("read_uncommitted: %v, want the fenced writer's out-0 too", all[0])
	}
}

// TestSDKTxnWriterCommitUnanswered: a TxnWriter's commit whose answer
// never comes (the proxy holds the EndTxn response until Commit's ctx has
// ended; the cluster did commit) returns ErrTxnUnknown, not ErrTxnAborted:
// its writes are visible read_committed. The next Begin works (the engine
// had kept the unconfirmed transaction open, and refused it before).
func TestSDKTxnWriterCommitUnanswered(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-txn-unanswered-%d", time.Now().UnixNano())
	createTopic(t, ctx, addrs, topic, 1)
	proxy, err := kproxy.Start(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	held, release := make(chan struct{}, 1), make(chan struct{})
	var ends atomic.Int64
	proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key == int16(kmsg.EndTxn) && ends.Add(1) == 1 {
			held <- struct{}{}
			<-release
		}
		return resp
	})
	w, err := sdk.NewTxnWriter(&kafka.Writer{Addr: kafka.TCP(proxy.Addr()), Topic: topic}, controlsOptions(sdk.WithTransactionalID(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i, commit := range []bool{false, true} {
		if err := w.Begin(); err != nil {
			t.Fatalf("transaction %d: Begin: %v", i, err)
		}
		if err := w.WriteMessages(ctx, kafka.Message{Value: fmt.Appendf(nil, "out-%d", i)}); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := w.Commit(ctx); err != nil {
				t.Fatalf("transaction %d: Commit: %v", i, err)
			}
			continue
		}
		cctx, ccancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Commit(cctx) }()
		<-held
		ccancel()
		err := <-done
		close(release)
		if !errors.Is(err, sdk.ErrTxnUnknown) || errors.Is(err, sdk.ErrTxnAborted) {
			t.Fatalf("Commit without an answer: %v; want ErrTxnUnknown, not ErrTxnAborted", err)
		}
	}
	got, err := eostest.ReadToEnd(ctx, addrs, topic, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0], []string{"out-0", "out-1"}) {
		t.Errorf("read_committed: %v, want [out-0 out-1] (the unanswered commit was committed)", got[0])
	}
}

// TestSDKProcessorCloseDuringStuckCommit: a coordinator that answers
// every EndTxn with CONCURRENT_TRANSACTIONS (a transaction stuck on the
// cluster; here a proxy rewriting the answers) keeps the engine retrying
// Run's commit without end. Run warns each WriteTimeout it waits. Close
// must still return, within its bound (WriteTimeout plus
// ReaderCloseTimeout), and Run with io.ErrClosedPipe. Before, Close
// waited for the commit's lock for as long as the coordinator answered
// so.
func TestSDKProcessorCloseDuringStuckCommit(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in, out, group := eosTopics(t, ctx, addrs, "azkafka-eoss")
	if w := <-writeEosInput(ctx, addrs, in, 0, 100, nil); w.err != nil {
		t.Fatal(w.err)
	}
	proxy, err := kproxy.Start(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	stuck := make(chan struct{})
	var refused atomic.Int64
	proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key != int16(kmsg.EndTxn) {
			return resp
		}
		r, err := kproxy.DecodeResponse(req, resp)
		if err != nil {
			return resp
		}
		r.(*kmsg.EndTxnResponse).ErrorCode = kerr.ConcurrentTransactions.Code
		if refused.Add(1) == 3 {
			close(stuck) // the engine is retrying
		}
		return kproxy.EncodeResponse(req, r)
	})
	const writeTimeout = 2 * time.Second
	logs := logwatch.New("end is still waiting for the transaction coordinator")
	p, err := sdk.NewProcessor(kafka.ReaderConfig{Brokers: []string{proxy.Addr()}, GroupID: group, Topic: in,
		MaxWait: 100 * time.Millisecond}, &kafka.Writer{Topic: out, Balancer: &kafka.Hash{}, WriteTimeout: writeTimeout},
		controlsOptions(sdk.WithTransactionalID(group), sdk.WithLogger(logs.Logger()))...)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx, eostest.Job) }()
	select {
	case <-stuck:
	case err := <-ran:
		t.Fatalf("Run returned before its commit was refused 3 times: %v", err)
	case <-ctx.Done():
		t.Fatal("no EndTxn was refused 3 times")
	}
	select {
	case <-logs.Warned():
	case err := <-ran:
		t.Fatalf("Run returned before it warned of its waiting commit: %v", err)
	case <-ctx.Done():
		t.Fatalf("no warning of the waiting commit (%d refusals)", refused.Load())
	}
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- p.Close() }()
	// A hang detector, well past Close's bound.
	const hang = 30 * time.Second
	select {
	case err := <-closed:
		t.Logf("Close returned after %v (bound %v): %v", time.Since(start).Round(time.Millisecond), writeTimeout+sdk.ReaderCloseTimeout, err)
	case <-time.After(hang):
		t.Fatalf("Close had not returned after %v, with the commit retried without end (%d refusals)", hang, refused.Load())
	}
	if err := <-ran; !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Run returned %v, want io.ErrClosedPipe", err)
	}
}

// TestSDKProcessorKilled: 3 eosproc processes (conformance/cmd/eosproc)
// in one group, under both group protocols. While the input is written,
// one of them is killed with SIGKILL at a random moment and restarted with
// its transactional ID, 20 times; then one is stopped with SIGSTOP while
// more input comes, until the others have taken its partitions and
// written every input's output, and resumed: a zombie, whose commit must
// fail; then more input. read_committed sees each
// input's output once, in the input's order per key, and Kafka's Java
// consumer read_committed sees the same; read_uncommitted also shows what
// the kills and the zombie left aborted.
// AZKAFKA_CONFORMANCE_EOS_MESSAGES sets the input's size (default 100,000).
func TestSDKProcessorKilled(t *testing.T) {
	inLane(t, &brokerLane)
	addrs := brokers(t)
	bin, n := buildEosproc(t), eosMessages(t)
	for _, tc := range []struct {
		name     string
		protocol sdk.GroupProtocol
		static   bool
	}{
		{"classic", sdk.GroupProtocolClassic, false},
		{"consumer", sdk.GroupProtocolConsumer, false},
		{"classic-static", sdk.GroupProtocolClassic, true},
	} {
		t.Run(tc.name, func(t *testing.T) { processorsKilled(t, addrs, bin, tc.protocol, tc.static, n) })
	}
}

// buildEosproc builds conformance/cmd/eosproc into the test's temp dir
// and returns the binary's path.
func buildEosproc(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "eosproc")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/eosproc").CombinedOutput(); err != nil {
		t.Fatalf("building eosproc: %v\n%s", err, out)
	}
	return bin
}

// eosMessages is the size of the input of the tests that kill eosproc
// processes: AZKAFKA_CONFORMANCE_EOS_MESSAGES, default 100,000.
func eosMessages(t *testing.T) int {
	t.Helper()
	v := os.Getenv("AZKAFKA_CONFORMANCE_EOS_MESSAGES")
	if v == "" {
		return 100000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1000 {
		t.Fatalf("AZKAFKA_CONFORMANCE_EOS_MESSAGES=%q: want a number of at least 1000", v)
	}
	return n
}

// eosprocs are the eosproc processes of a test: process i runs with
// transactional ID <group>-<i>.
type eosprocs struct {
	t              *testing.T
	bin            string
	addrs          []string
	group, in, out string
	protocol       sdk.GroupProtocol
	static         bool // static members (-static)
	procs          []*eosproc
}

// eosproc is one process, started at started; done is closed once it
// exited, err is then Wait's.
type eosproc struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	err     error
}

// startEosprocs starts n eosproc processes of group from in to out,
// static members if static; they are stopped when the test ends.
func startEosprocs(t *testing.T, bin string, addrs []string, group, in, out string, protocol sdk.GroupProtocol, static bool, n int) *eosprocs {
	t.Helper()
	e := &eosprocs{t: t, bin: bin, addrs: addrs, group: group, in: in, out: out, protocol: protocol, static: static}
	for i := range n {
		e.procs = append(e.procs, e.start(i))
	}
	t.Cleanup(func() {
		for _, p := range e.procs {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.done
		}
	})
	return e
}

// id is process i's transactional ID.
func (e *eosprocs) id(i int) string { return fmt.Sprintf("%s-%d", e.group, i) }

// start starts process i.
func (e *eosprocs) start(i int) *eosproc {
	e.t.Helper()
	args := []string{"-brokers", strings.Join(e.addrs, ","), "-group", e.group, "-in", e.in, "-out", e.out,
		"-id", e.id(i), "-protocol", string(e.protocol), "-engine", eosEngine()}
	if e.static {
		args = append(args, "-static")
	}
	cmd := exec.Command(e.bin, args...)
	cmd.Stderr = &prefixWriter{t: e.t, prefix: fmt.Sprintf("eosproc %d: ", i)}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &eosproc{cmd: cmd, started: started, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p
}

// signal sends sig to process i.
func (e *eosprocs) signal(i int, sig os.Signal) {
	e.t.Helper()
	if err := e.procs[i].cmd.Process.Signal(sig); err != nil {
		e.t.Fatalf("eosproc %d: %v: %v", i, sig, err)
	}
}

// killRestart kills process i with SIGKILL and starts it again with its
// transactional ID.
func (e *eosprocs) killRestart(i int) {
	e.t.Helper()
	_ = e.procs[i].cmd.Process.Kill()
	<-e.procs[i].done
	e.procs[i] = e.start(i)
}

// ended describes the processes that exited though not killed by
// killRestart.
func (e *eosprocs) ended() []string {
	var out []string
	for i, p := range e.procs {
		select {
		case <-p.done:
			out = append(out, fmt.Sprintf("eosproc %d: %v", i, p.err))
		default:
		}
	}
	return out
}

// inputWritten is what writeEosInput wrote: inputs from, from+1, ...
// from+n-1, and the first error, if any.
type inputWritten struct {
	n   int
	err error
}

// writeEosInput writes the inputs from, from+1, ... to topic in waves of
// 1,000, 50 ms apart: n of them, and then, unless until is nil, more
// waves until until is closed (for a test waiting on an event the input
// makes happen, which must not run out of input first). The channel gets
// what was written.
func writeEosInput(ctx context.Context, addrs []string, topic string, from, n int, until <-chan struct{}) <-chan inputWritten {
	out := make(chan inputWritten, 1)
	go func() {
		const wave = 1000
		i := from
	waves:
		for {
			size := min(wave, from+n-i)
			if size <= 0 {
				if until == nil {
					break
				}
				select {
				case <-until:
					break waves
				default:
					size = wave
				}
			}
			if err := eostest.WriteInput(ctx, addrs, topic, i, size, eosKeys); err != nil {
				out <- inputWritten{n: i - from, err: err}
				return
			}
			i += size
			time.Sleep(50 * time.Millisecond)
		}
		out <- inputWritten{n: i - from}
	}()
	return out
}

func processorsKilled(t *testing.T, addrs []string, bin string, protocol sdk.GroupProtocol, static bool, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	in, out, group := eosTopics(t, ctx, addrs, "azkafka-eosk")
	if protocol == sdk.GroupProtocolConsumer {
		// The zombie's partitions move after its session timeout: 6 s,
		// as the classic members', rather than the broker's 45 s.
		setG848GroupTimeouts(t, ctx, addrs[0], group)
	}
	e := startEosprocs(t, bin, addrs, group, in, out, protocol, static, 3)
	input := writeEosInput(ctx, addrs, in, 0, n, nil)
	seed := uint64(time.Now().UnixNano())
	t.Logf("kills at random moments, seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	const kills = 20
	interrupted := 0
	for range kills {
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
		i := rng.IntN(len(e.procs))
		// A static member restarted takes its partitions back at once,
		// so its kill can wait (up to a second) for an open transaction
		// to interrupt; a dynamic one's group rebalances after each kill.
		wait := time.Duration(0)
		if static {
			wait = time.Second
		}
		ongoing := txnOngoing(ctx, addrs[0], e.id(i), e.procs[i].started, wait)
		e.killRestart(i)
		if ongoing {
			interrupted++
		}
		t.Logf("killed and restarted process %d (its transaction open: %v)", i, ongoing)
	}
	if w := <-input; w.err != nil {
		t.Fatal(w.err)
	}
	// The zombie: stopped while the group assigns it partitions, then
	// more input, which the others can only process by taking its
	// partitions (after its session timeout, and its open transaction's,
	// if any, aborted by the cluster); then resumed, and more input.
	zombie := rng.IntN(len(e.procs))
	e.signal(zombie, syscall.SIGSTOP)
	stopped := time.Now()
	if err := eostest.WriteInput(ctx, addrs, in, n, 1000, eosKeys); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, ctx, addrs, out, n+1000)
	t.Logf("with process %d stopped, the others wrote every output in %v", zombie, time.Since(stopped).Round(time.Millisecond))
	e.signal(zombie, syscall.SIGCONT)
	if err := eostest.WriteInput(ctx, addrs, in, n+1000, 1000, eosKeys); err != nil {
		t.Fatal(err)
	}
	n += 2000
	got := waitOutput(t, ctx, addrs, out, n)
	if err := eostest.Check(got, n, eosKeys); err != nil {
		t.Fatalf("read_committed output of %d messages after %d kills and a zombie: %v", n, kills, err)
	}
	checkJavaAgrees(t, ctx, addrs, out, got)
	all, err := eostest.ReadToEnd(ctx, addrs, out, eosParts, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (static members: %v): %d inputs, %d SIGKILLs (%d of a process with its transaction open) and a SIGSTOP zombie: read_committed saw each output once, in order per key; read_uncommitted %d, %d of them aborted",
		protocol, static, n, kills, interrupted, eostest.Count(all), eostest.Count(all)-n)
}

// txnOngoing reports whether transactional ID id has a transaction begun
// since since Ongoing at the coordinator at addr, asking every 10 ms for
// up to wait (once when wait is 0).
func txnOngoing(ctx context.Context, addr, id string, since time.Time, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		state, began, err := describeTxn(ctx, addr, id)
		if err == nil && ongoingSince(state, began, since) {
			return true
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ongoingSince reports whether a transaction described as state, begun at
// began (a millisecond timestamp), is open and began at or after since: not
// one a killed process left open.
func ongoingSince(state string, began, since time.Time) bool {
	return state == "Ongoing" && !began.Before(since.Truncate(time.Millisecond))
}

// committedOutput reads topic read_committed: done once it holds n
// messages, each input's output once in the input's order per key (t
// fails otherwise).
func committedOutput(t *testing.T, ctx context.Context, addrs []string, topic string, n int) (got map[int32][]string, done bool) {
	t.Helper()
	got, err := eostest.ReadToEnd(ctx, addrs, topic, eosParts, true)
	if err != nil {
		t.Fatal(err)
	}
	if eostest.Count(got) < n {
		return got, false
	}
	if err := eostest.Check(got, n, eosKeys); err != nil {
		t.Fatalf("read_committed output of %d messages: %v", n, err)
	}
	return got, true
}

// waitOutput reads topic read_committed until it holds at least n values.
func waitOutput(t *testing.T, ctx context.Context, addrs []string, topic string, n int) map[int32][]string {
	t.Helper()
	for {
		got, err := eostest.ReadToEnd(ctx, addrs, topic, eosParts, true)
		if err != nil {
			t.Fatal(err)
		}
		if eostest.Count(got) >= n {
			return got
		}
		if ctx.Err() != nil {
			t.Fatalf("the output has %d of %d messages", eostest.Count(got), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// prefixWriter logs what a process writes, line by line.
type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.t.Log(w.prefix + line)
	}
	return len(b), nil
}

// eosEngine is the engine eosproc runs: AZKAFKA_CONFORMANCE_EOS_ENGINE=kgo
// runs franz-go's GroupTransactSession directly, the control.
func eosEngine() string {
	if v := os.Getenv("AZKAFKA_CONFORMANCE_EOS_ENGINE"); v != "" {
		return v
	}
	return "sdk"
}

// TestSDKProcessorCommitUnanswered: a Processor's commit whose answer
// never comes (the proxy holds the EndTxn response until Commit's ctx has
// ended; the cluster did commit) may have been committed: its error says
// so (ErrTxnUnknown), not that it was aborted, and the Processor stops,
// since the engine's session went back to the offsets it knew were
// committed and reading on would read the committed batch again. A new
// Processor with the same transactional ID reads on from what the cluster
// committed: read_committed sees each input's output once, through two
// such commits. Before, the error claimed an abort and the next
// FetchMessages failed with the engine's "already in a transaction".
func TestSDKProcessorCommitUnanswered(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in, out, group := eosTopics(t, ctx, addrs, "azkafka-eosu")
	const n = 3000
	if w := <-writeEosInput(ctx, addrs, in, 0, n, nil); w.err != nil {
		t.Fatal(w.err)
	}
	proxy, err := kproxy.Start(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	// The EndTxn responses of the 2nd and the 5th EndTxn are held until
	// the test lets them through.
	var ends atomic.Int64
	held, release := make(chan struct{}, 1), make(chan struct{}, 1)
	proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key != int16(kmsg.EndTxn) {
			return resp
		}
		if i := ends.Add(1); i == 2 || i == 5 {
			held <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return resp
	})
	start := func() *sdk.Processor {
		p, err := sdk.NewProcessor(kafka.ReaderConfig{Brokers: []string{proxy.Addr()}, GroupID: group, Topic: in,
			MaxWait: 100 * time.Millisecond}, &kafka.Writer{Topic: out, Balancer: &kafka.Hash{}},
			controlsOptions(sdk.WithTransactionalID(group))...)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := start()
	defer func() { p.Close() }()
	unanswered := 0
	for batch := 1; ; batch++ {
		if _, done := committedOutput(t, ctx, addrs, out, n); done {
			break
		}
		msgs, err := p.FetchMessages(ctx, 300)
		if err != nil {
			t.Fatalf("batch %d: FetchMessages: %v", batch, err)
		}
		if err := eostest.Job(ctx, msgs, p); err != nil {
			t.Fatalf("batch %d: WriteMessages: %v", batch, err)
		}
		cctx, ccancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Commit(cctx) }()
		select {
		case err = <-done:
			ccancel()
			if err != nil && !errors.Is(err, sdk.ErrTxnRebalanced) {
				t.Fatalf("batch %d: Commit: %v", batch, err)
			}
			continue
		case <-held:
		}
		// The cluster has the EndTxn and its answer is held: end the
		// Commit's ctx, then let the answer through.
		ccancel()
		err = <-done
		release <- struct{}{}
		unanswered++
		if !errors.Is(err, sdk.ErrTxnUnknown) || errors.Is(err, sdk.ErrTxnAborted) {
			t.Fatalf("batch %d: Commit without an answer: %v; want ErrTxnUnknown, not ErrTxnAborted", batch, err)
		}
		if _, err := p.FetchMessages(ctx, 300); !errors.Is(err, sdk.ErrTxnUnknown) {
			t.Fatalf("batch %d: FetchMessages after the unanswered commit: %v, want ErrTxnUnknown (the Processor stopped)", batch, err)
		}
		if err := p.Close(); err != nil {
			t.Logf("batch %d: Close after the unanswered commit: %v", batch, err)
		}
		p = start()
	}
	if unanswered != 2 {
		t.Fatalf("%d commits went unanswered, want 2: the test proved nothing", unanswered)
	}
	t.Logf("%d inputs: read_committed saw each output once through 2 commits without an answer, each followed by a new Processor", n)
}
