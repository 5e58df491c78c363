package hostile_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/hostile"
)

// callTimeout is each client's call context; diagnose gets it as --timeout.
// Every client reaches the step where its fault strikes well within it
// (the Reader's Fetch comes after its group join, in about 0.5 s).
const callTimeout = 5 * time.Second

// Bounds every run must keep. A client's call may take its context plus
// the SDK's documented dial timeout; Close is bounded separately, so that
// a hang anywhere shows as a failure, not a stuck test.
const (
	maxCall     = callTimeout + 2*time.Second // diagnose: + its 0.5 s grace and the process start
	maxClose    = 10 * time.Second            // the documented bounds: the Writer's WriteTimeout (its default), sdk.ReaderCloseTimeout
	maxPeakRSS  = 300 << 20                   // bytes; an idle client process takes about 30 MiB
	childVMSize = 4 << 30                     // address-space cap of a client process
)

// clientNames are the clients of the SDK run against every case: its own
// Writer and Reader, kafka-go's clients on the SDK's Dialer and Transport,
// iq's cluster source and azkafka diagnose.
var clientNames = []string{
	"sdk.Writer/idempotent",
	"sdk.Writer/acks=1",
	"sdk.Reader",
	"kafka.Writer+NewTransport",
	"kafka.Reader+NewAZAwareDialer",
	"kafka.Client+NewTransport",
	"iq.NewClusterSource",
	"azkafka diagnose",
}

// controlNames are kafka-go's clients without the SDK: run only with
// HOSTILE_CONTROL=1, recorded and not asserted.
var controlNames = []string{"raw/kafka.Writer", "raw/kafka.Reader", "raw/kafka.Client"}

// cause is what an error must say once the server misbehaved at a client,
// per case.
var cause = map[hostile.Case]string{
	hostile.NegativeSize:       "negative response size -16",
	hostile.HugeSize:           "response of 2147483647 bytes exceeds the",
	hostile.WrongCorrelation:   "the connection is out of step",
	hostile.RandomBody:         "malformed ",
	hostile.HeaderTagsBomb:     "response header",
	hostile.ApiVersionsBomb:    "malformed ApiVersions",
	hostile.MetadataBomb:       "malformed Metadata",
	hostile.InitProducerIDBomb: "malformed InitProducerID",
	hostile.ProduceBomb:        "malformed Produce",
	hostile.FetchBomb:          "malformed Fetch",
	hostile.DescribeGroupsBomb: "malformed DescribeGroups",
	hostile.HTTP400:            `not a Kafka broker: its reply begins "HTTP/1.1 400 Bad Request"`,
	hostile.TLSAlert:           "a TLS record on a plaintext connection",
	hostile.PlaintextForTLS:    "is this port a plaintext listener?",
}

// run is one client against one case.
type run struct {
	c       hostile.Case
	client  string
	control bool

	exit    int
	stderr  string
	peakRSS int64 // bytes
	wall    time.Duration
	res     result
	faults  int64
	runErr  error
}

// result is hostileclient's JSON line.
type result struct {
	Err     string   `json:"err"`
	Logged  []string `json:"logged"`
	OpMs    int64    `json:"op_ms"`
	CloseMs int64    `json:"close_ms"`
}

// TestClientsAgainstHostileBrokers runs every client of the SDK, each in
// its own process, against every case of misbehaving broker, and checks
// that none panics or crashes in any goroutine, each call returns within
// its context plus the documented timeouts and Close within its bound, the
// process's peak memory stays bounded, and, once the server misbehaved at
// it, the error names the broker's address and the cause. With
// HOSTILE_TABLE=file it writes the table of cases × clients (markdown);
// with HOSTILE_CONTROL=1 it also runs kafka-go's clients without the SDK,
// as a record of what they do (not asserted).
func TestClientsAgainstHostileBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs 120 client processes")
	}
	bin := buildClients(t)
	names := clientNames
	if os.Getenv("HOSTILE_CONTROL") == "1" {
		names = append(append([]string(nil), names...), controlNames...)
	}
	var runs []*run
	for _, c := range hostile.Cases() {
		for _, n := range names {
			runs = append(runs, &run{c: c, client: n, control: strings.HasPrefix(n, "raw/")})
		}
	}
	// The processes wait on sockets and timers most of the time: six at
	// once keep two cores busy without starving any.
	sem := make(chan struct{}, 6)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r.do(bin)
		}()
	}
	wg.Wait()

	for _, r := range runs {
		t.Run(string(r.c)+"/"+r.client, func(t *testing.T) {
			if r.control {
				t.Logf("control: exit %d, peak %d MiB, %v: %s%s", r.exit, r.peakRSS>>20, r.wall.Round(time.Millisecond), r.res.Err, firstLine(r.stderr))
				return
			}
			r.check(t)
		})
	}
	if path := os.Getenv("HOSTILE_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(table(runs)), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// buildClients builds hostileclient and azkafka (without the race
// detector: the processes measure the clients, not the detector).
func buildClients(t *testing.T) string {
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./hostileclient", "../../../cmd/azkafka")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

func (r *run) do(bin string) {
	srv, err := hostile.Start(r.c)
	if err != nil {
		r.runErr = err
		return
	}
	defer srv.Close()
	tlsOn := r.c == hostile.PlaintextForTLS
	var cmd *exec.Cmd
	if r.client == "azkafka diagnose" {
		args := []string{"diagnose", "--bootstrap", srv.Addr(), "--timeout", callTimeout.String()}
		if tlsOn {
			args = append(args, "--tls")
		}
		cmd = exec.Command(filepath.Join(bin, "azkafka"), args...)
		cmd.Env = []string{"AZKAFKA_AZ=az1", "HOME=" + os.TempDir()}
	} else {
		args := []string{"-client", r.client, "-addr", srv.Addr(), "-timeout", callTimeout.String(), fmt.Sprintf("-max-vm=%d", childVMSize)}
		if tlsOn {
			args = append(args, "-tls")
		}
		cmd = exec.Command(filepath.Join(bin, "hostileclient"), args...)
		cmd.Env = []string{"HOME=" + os.TempDir(), "GOTRACEBACK=all"}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	r.wall = time.Since(start)
	r.faults = srv.Faults()
	r.stderr = stderr.String()
	if cmd.ProcessState == nil {
		r.runErr = err
		return
	}
	r.exit = cmd.ProcessState.ExitCode()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.peakRSS = ru.Maxrss << 10 // KiB on Linux
	}
	if r.client == "azkafka diagnose" {
		r.res.Err = strings.TrimSpace(r.stderr)
		r.res.OpMs = r.wall.Milliseconds()
		return
	}
	if r.exit == 0 {
		if err := json.Unmarshal(stdout.Bytes(), &r.res); err != nil {
			r.runErr = fmt.Errorf("hostileclient output %q: %w", stdout.String(), err)
		}
	}
}

func (r *run) check(t *testing.T) {
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	diagnose := r.client == "azkafka diagnose"
	switch {
	case strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "fatal error:"):
		t.Fatalf("the client crashed (exit %d):\n%s", r.exit, clip(r.stderr))
	case diagnose && r.exit != 0 && r.exit != 1:
		t.Fatalf("diagnose exited %d:\n%s", r.exit, clip(r.stderr))
	case !diagnose && r.exit != 0:
		t.Fatalf("hostileclient exited %d:\n%s", r.exit, clip(r.stderr))
	}
	if r.peakRSS > maxPeakRSS {
		t.Errorf("peak RSS %d MiB, bound %d MiB", r.peakRSS>>20, maxPeakRSS>>20)
	}
	if op := time.Duration(r.res.OpMs) * time.Millisecond; op > maxCall {
		t.Errorf("the call took %v, bound %v", op, maxCall)
	}
	if cl := time.Duration(r.res.CloseMs) * time.Millisecond; cl > maxClose {
		t.Errorf("Close took %v, bound %v", cl, maxClose)
	}
	if r.faults == 0 {
		return // the case never reached this client: nothing more to show
	}
	if r.res.Err == "" {
		t.Fatalf("the server misbehaved %d times, yet the call returned no error", r.faults)
	}
	if diagnose && r.exit != 1 {
		t.Errorf("diagnose exited %d after the server misbehaved, want 1", r.exit)
	}
	want, ok := cause[r.c]
	if !ok {
		return // Silent: the error is the context's
	}
	// kafka-go's Reader never returns a connection's error from
	// ReadMessage, only its context's: it logs the cause to ErrorLogger.
	said := r.res.Err
	if r.client == "kafka.Reader+NewAZAwareDialer" {
		said = strings.Join(r.res.Logged, "\n")
	}
	if !strings.Contains(said, want) {
		t.Errorf("the error does not say %q:\n%s", want, clip(said))
	}
	if addr := "127.0.0.1:"; !strings.Contains(said, addr) {
		t.Errorf("the error does not name the broker's address:\n%s", clip(said))
	}
}

// table renders the runs as markdown: one row per case, one column per
// client, each cell "call time (Close time), peak memory: error".
func table(runs []*run) string {
	var b strings.Builder
	var cols []string
	seen := map[string]bool{}
	for _, r := range runs {
		if !seen[r.client] {
			seen[r.client] = true
			cols = append(cols, r.client)
		}
	}
	fmt.Fprintf(&b, "| case | %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for i := 0; i < len(runs); i += len(cols) {
		fmt.Fprintf(&b, "| %s |", runs[i].c)
		for _, r := range runs[i : i+len(cols)] {
			msg := r.res.Err
			if r.client == "kafka.Reader+NewAZAwareDialer" || r.client == "raw/kafka.Reader" {
				if len(r.res.Logged) > 0 {
					msg += " (logged: " + r.res.Logged[0] + ")"
				}
			}
			if r.exit != 0 && r.client != "azkafka diagnose" {
				msg = fmt.Sprintf("exit %d: %s", r.exit, firstLine(r.stderr))
			}
			if msg == "" {
				msg = "ok"
			}
			fmt.Fprintf(&b, " %.1f s (Close %.1f s), %d MiB: %s |", float64(r.res.OpMs)/1e3, float64(r.res.CloseMs)/1e3, r.peakRSS>>20, strings.ReplaceAll(clipLine(msg, 160), "|", "\\|"))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func clipLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func clip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "…"
	}
	return s
}
