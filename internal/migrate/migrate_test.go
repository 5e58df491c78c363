package migrate

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// corpus are the packages of testdata/corpus the tests migrate, written as
// kafka-go programs are: a service (an HTTP handler on a shared Writer, a
// group Reader that fetches, processes and commits, a Stats parameter), a
// worker pool of Readers, a struct holding both behind an interface the
// module defines (kafka-go imported under another name), and a package
// handing its Writer to another module, to reflect, and reading its
// fields, and one taking its Writer from that one; outsideapi hands its
// Writer and stats to another module's API in each way its types allow
// (a kafka.WriterStats, a []*kafka.Writer, a func(*kafka.Writer)
// variable, a *kafka.Writer variable, an interface), and returns that
// module's Writer; stats keeps Stats in its own types and literals;
// funcvalue keeps kafka.NewReader as a function value; newwriter uses the
// deprecated kafka.NewWriter(kafka.WriterConfig{...}); shadow names a
// parameter and a variable sdk; readme is the README's example.
//
// producerapi and consumerlogger are shaped like kafka-go's
// examples/producer-api (an HTTP endpoint writing request bodies through
// one Writer) and examples/consumer-logger (a group Reader's loop logging
// each message), but written anew: kafka-go's examples are nested modules
// (each has a go.mod), which the module zip of github.com/segmentio/kafka-go
// leaves out, so they are not in the module cache to migrate, and their
// code is not copied here.
//
// thirdparty stands for another module: it is never given. Each package
// has tests, which run (on the embedded broker where they need one)
// before and after the migration.
var corpus = []string{"./testdata/corpus/service", "./testdata/corpus/pool", "./testdata/corpus/holder",
	"./testdata/corpus/handoff", "./testdata/corpus/usehandoff", "./testdata/corpus/outsideapi",
	"./testdata/corpus/stats", "./testdata/corpus/funcvalue", "./testdata/corpus/newwriter",
	"./testdata/corpus/shadow", "./testdata/corpus/producerapi", "./testdata/corpus/consumerlogger",
	"./testdata/corpus/runtimepanic", "./testdata/corpus/readme/..."}

// refusedWant are the sites the migration must leave, and only those:
// file:line and a part of the reason.
var refusedWant = []string{
	"funcvalue/funcvalue.go:7: kafka.NewReader used as a function value",
	"funcvalue/funcvalue.go:9: kafka.NewReader used as a function value",
	"handoff/handoff.go:16: goes to thirdparty.Instrument",
	"handoff/handoff.go:17: goes to reflect.TypeOf",
	"handoff/handoff.go:18: reads field Topic",
	"newwriter/newwriter.go:10: kafka.NewWriter(kafka.WriterConfig{...}) (deprecated): its Writer is no &kafka.Writer{...}",
	"outsideapi/outsideapi.go:21: a kafka.WriterStats goes to thirdparty.Report, outside the packages migrated",
	"outsideapi/outsideapi.go:22: a []*kafka.Writer goes to thirdparty.Topics, outside the packages migrated",
	"outsideapi/outsideapi.go:23: a func(*kafka.Writer) is assigned to thirdparty.OnClose, outside the packages migrated",
	"outsideapi/outsideapi.go:24: a *kafka.Writer is assigned to thirdparty.Default, outside the packages migrated",
	"outsideapi/outsideapi.go:25: goes to thirdparty.Register as a thirdparty.WriterSource, which it would no longer implement",
	"outsideapi/outsideapi.go:31: thirdparty.Default, a *kafka.Writer of code outside the packages migrated, is returned",
	"outsideapi/outsideapi.go:26: goes to thirdparty.Describe as a any, outside the packages migrated: code there may assert",
	"readme/audit/audit.go:11: goes to thirdparty.Instrument",
	"runtimepanic/runtimepanic.go:13: a kafka.Writer literal without Addr",
	"runtimepanic/runtimepanic.go:24: a kafka.Writer whose Transport is a runtimepanic.roundTripper",
	"usehandoff/usehandoff.go:1: shares kafka-go Writer or Reader values with github.com/azkafka/azkafka/internal/migrate/testdata/corpus/handoff",
}

func dir(t *testing.T) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// goCmd runs the go command in d with the overlay, for args.
func goCmd(t *testing.T, d, overlay string, args ...string) (string, error) {
	t.Helper()
	if overlay != "" {
		args = append([]string{args[0], "-overlay", overlay}, args[1:]...)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = d
	// The corpus's clients run on the embedded broker; the SDK's need not
	// ask cloud metadata for their zone.
	cmd.Env = append(os.Environ(), "AZKAFKA_AZ=az-a")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// writeOverlay writes res's files to a temporary directory and returns the
// go command's -overlay file replacing the originals with them.
func writeOverlay(t *testing.T, files map[string][]byte) string {
	t.Helper()
	tmp := t.TempDir()
	replace := map[string]string{}
	for name, b := range files {
		p := filepath.Join(tmp, filepath.Base(filepath.Dir(name))+"-"+filepath.Base(name))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		replace[name] = p
	}
	j, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, j, 0o644); err != nil {
		t.Fatal(err)
	}
	return ov
}

// TestMigrateCorpus: the corpus's tests pass as kafka-go programs; after
// the migration they build, vet clean and pass their tests on the SDK; the
// sites left unchanged are exactly the expected ones; a second run changes
// nothing.
func TestMigrateCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests the corpus twice")
	}
	d := dir(t)
	if out, err := goCmd(t, d, "", append([]string{"test", "-count=1"}, corpus...)...); err != nil {
		t.Fatalf("the corpus fails as kafka-go programs:\n%s", out)
	}
	res, err := Run(Config{Dir: d, Patterns: corpus})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res.Refused {
		rel, _ := filepath.Rel(filepath.Join(d, "testdata", "corpus"), s.Pos.Filename)
		got = append(got, rel+":"+strconv.Itoa(s.Pos.Line)+": "+s.Reason)
	}
	if len(got) != len(refusedWant) {
		t.Errorf("left unchanged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(refusedWant, "\n"))
	}
	for _, w := range refusedWant {
		file, reason, _ := strings.Cut(w, ": ")
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, file+": ") && strings.Contains(g, reason) }) {
			t.Errorf("no refusal %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	for name := range res.Files {
		for _, left := range []string{"/handoff/", "/usehandoff/", "/outsideapi/", "/funcvalue/", "/newwriter/", "/audit/", "/runtimepanic/"} {
			if strings.Contains(name, left) {
				t.Errorf("%s rewritten, though its package is left unchanged", name)
			}
		}
	}
	for file, wants := range map[string][]string{
		"service/service.go": {"writer *sdk.Writer", "sdk.MustNewWriter(&kafka.Writer{", "sdk.MustNewReader(kafka.ReaderConfig{", "func report(s sdk.WriterStats)", "func readerStats(r *sdk.Reader)"},
		"stats/stats.go": {"func Report(s sdk.WriterStats)", "var zero = sdk.WriterStats{WriterStats: kafka.WriterStats{}}",
			"[]sdk.WriterStats{{WriterStats: kafka.WriterStats{Messages: 1}}, zero}", "Report(sdk.WriterStats{WriterStats: kafka.WriterStats{Messages: 2}})",
			"&sdk.ReaderStats{ReaderStats: kafka.ReaderStats{Topic: topic}}"},
		"shadow/shadow.go":        {`azsdk "github.com/azkafka/azkafka/sdk"`, "func New(sdk string) *azsdk.Writer", "azsdk.MustNewReader(kafka.ReaderConfig{"},
		"producerapi/main.go":     {"func produce(w *sdk.Writer) http.HandlerFunc", "return sdk.MustNewWriter(&kafka.Writer{"},
		"consumerlogger/main.go":  {"r *sdk.Reader, out io.Writer", "return sdk.MustNewReader(kafka.ReaderConfig{"},
		"readme/events/events.go": {"func Open(brokers []string) (*sdk.Writer, *sdk.Reader)"},
	} {
		src := res.Files[filepath.Join(d, "testdata/corpus", file)]
		for _, want := range wants {
			if !bytes.Contains(src, []byte(want)) {
				t.Errorf("%s after the migration has no %q:\n%s", file, want, src)
			}
		}
	}

	ov := writeOverlay(t, res.Files)
	for _, args := range [][]string{{"build"}, {"vet"}, {"test", "-count=1"}} {
		if out, err := goCmd(t, d, ov, append(args, corpus...)...); err != nil {
			t.Fatalf("go %s after the migration:\n%s", args[0], out)
		}
	}

	again, err := Run(Config{Dir: d, Patterns: corpus, Overlay: res.Files})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Files) != 0 {
		var b bytes.Buffer
		_ = again.WriteDiff(&b, d)
		t.Errorf("a second run changes %d files:\n%s", len(again.Files), b.String())
	}
}

// TestDiff: the dry run's unified diff of a one-line change.
func TestDiff(t *testing.T) {
	got := unified("x.go", "a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nD\ne\nf\ng\nh\n")
	want := "--- a/x.go\n+++ b/x.go\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n"
	if got != want {
		t.Errorf("unified:\n%s\nwant:\n%s", got, want)
	}
}

// TestRefusesBrokenPackages: packages that do not build are refused with
// their errors, before anything is rewritten.
func TestRefusesBrokenPackages(t *testing.T) {
	d := dir(t)
	name := filepath.Join(d, "testdata/corpus/holder/holder.go")
	_, err := Run(Config{Dir: d, Patterns: []string{"./testdata/corpus/holder"},
		Overlay: map[string][]byte{name: []byte("package holder\n\nfunc f() { undefined() }\n")}})
	if err == nil || !strings.Contains(err.Error(), "do not build") || !strings.Contains(err.Error(), "undefined") {
		t.Fatalf("err = %v, want the build error", err)
	}
}

// TestMigrateDialers: without --dialers a package of kafka-go Dialers and
// Transports is left as it is; with it, their literals get the SDK's
// client ID and connection policy, and the package builds and passes its
// tests.
func TestMigrateDialers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a package")
	}
	d := dir(t)
	pkgs := []string{"./testdata/corpus/dialer"}
	plain, err := Run(Config{Dir: d, Patterns: pkgs})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Files) != 0 {
		t.Errorf("without Dialers, %d files rewritten", len(plain.Files))
	}
	res, err := Run(Config{Dir: d, Patterns: pkgs, Dialers: true})
	if err != nil {
		t.Fatal(err)
	}
	src := string(res.Files[filepath.Join(d, "testdata/corpus/dialer/dialer.go")])
	for _, want := range []string{"sdk.MustNewAZAwareDialer(&kafka.Dialer{", "sdk.MustNewTransport(&kafka.Transport{"} {
		if !strings.Contains(src, want) {
			t.Errorf("no %q in:\n%s", want, src)
		}
	}
	if out, err := goCmd(t, d, writeOverlay(t, res.Files), append([]string{"test", "-count=1"}, pkgs...)...); err != nil {
		t.Fatalf("go test after the migration:\n%s", out)
	}
}

// TestWrite: Write replaces the files in place, keeping their mode.
func TestWrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (&Result{Files: map[string][]byte{p: []byte("new")}}).Write(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	st, _ := os.Stat(p)
	if err != nil || string(b) != "new" || st.Mode().Perm() != 0o600 {
		t.Fatalf("after Write: %q, %v, mode %v", b, err, st.Mode())
	}
}

// TestRefusals: each unsafe shape is left unchanged with its reason, and
// so is a package sharing Writer values with one left unchanged.
func TestRefusals(t *testing.T) {
	d := dir(t)
	handoff := filepath.Join(d, "testdata/corpus/handoff/handoff.go")
	src := `package handoff

import (
	"github.com/segmentio/kafka-go"; "sync/atomic"

	"github.com/azkafka/azkafka/internal/migrate/testdata/corpus/thirdparty"
)

type wrapped struct{ *kafka.Writer }

var byValue kafka.Writer

func New(brokers []string, topic string) (*kafka.Writer, string) {
	v := kafka.Writer{Topic: topic}
	_ = v
	n := new(kafka.Writer)
	_ = n
	w := &kafka.Writer{Addr: kafka.TCP(brokers...)}
	_ = thirdparty.Holder{W: w}
	_ = wrapped{w}
	return w, ""
}

var ptr atomic.Pointer[kafka.Writer]

func Stats(w *kafka.Writer) (kafka.WriterStats, []kafka.WriterStats) {
	return w.Stats(), []kafka.WriterStats{thirdparty.Default.Stats()}
}

func Clone(w *kafka.Writer) *kafka.Writer {
	c := *w
	return &c
}
`
	res, err := Run(Config{Dir: d, Patterns: []string{"./testdata/corpus/handoff"}, Overlay: map[string][]byte{
		handoff: []byte(src),
		filepath.Join(d, "testdata/corpus/handoff/handoff_test.go"): []byte("package handoff\n"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res.Refused {
		got = append(got, strconv.Itoa(s.Pos.Line)+": "+s.Reason)
	}
	for _, want := range []string{
		"9: embeds kafka.Writer",
		"11: holds a kafka.Writer by value",
		"14: a kafka.Writer literal used by value",
		"16: new(kafka.Writer)",
		"19: goes into a thirdparty.Holder",
		"24: holds a kafka.Writer by value",
		"27: thirdparty.Default.Stats(), a kafka.WriterStats of code outside the packages migrated, goes into a []kafka.WriterStats",
		"31: copies a kafka.Writer (*w); an sdk.Writer is used through its pointer",
	} {
		if !slices.ContainsFunc(got, func(g string) bool {
			line, reason, _ := strings.Cut(want, ": ")
			return strings.HasPrefix(g, line+": ") && strings.Contains(g, reason)
		}) {
			t.Errorf("no refusal %q in:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if len(res.Files) != 0 {
		t.Errorf("%d files rewritten in a package left unchanged", len(res.Files))
	}
}

// TestVerifyBacksTheChecks: with the comparison of types at flows off, the
// type check of the packages as rewritten still finds what in outsideapi
// would not build, and leaves the package unchanged, the type checker's
// error at the site before the rewrite.
func TestVerifyBacksTheChecks(t *testing.T) {
	d := dir(t)
	res, err := Run(Config{Dir: d, Patterns: []string{"./testdata/corpus/outsideapi"}, noFlows: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 0 {
		t.Errorf("%d files rewritten", len(res.Files))
	}
	var got []string
	for _, s := range res.Refused {
		got = append(got, strconv.Itoa(s.Pos.Line)+": "+s.Reason)
	}
	for _, want := range []string{"21: the package as rewritten would not build: ", "24: the package as rewritten would not build: "} {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("no refusal %q in:\n%s", want, strings.Join(got, "\n"))
		}
	}
}
