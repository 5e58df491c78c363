package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMigrateDryRun: without -w, migrate prints the unified diff of what
// it would write and a summary, and changes no file.
func TestMigrateDryRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"migrate", "../../internal/migrate/testdata/corpus/holder"}, nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"--- a/", "-\tW *kafkago.Writer", "+\tW *sdk.Writer", "+\t\tR: sdk.MustNewReader(kafkago.ReaderConfig{"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("no %q in the diff:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "would rewrite") || !strings.Contains(stderr.String(), "0 sites left unchanged") {
		t.Errorf("summary: %s", stderr.String())
	}
}

// TestMigrateRefusals: a package that hands its Writer to another module
// is listed, site by site, and the run still succeeds.
func TestMigrateRefusals(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"migrate", "-diff", "../../internal/migrate/testdata/corpus/handoff"}, nil, &stdout, &stderr)
	if code != exitOK || stdout.Len() != 0 {
		t.Fatalf("exit %d, diff %q", code, stdout.String())
	}
	if !strings.Contains(stderr.String(), "handoff.go:16:33: left unchanged: a *kafka.Writer goes to thirdparty.Instrument") ||
		!strings.Contains(stderr.String(), "3 sites left unchanged") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

// TestMigrateUsage: help documents the flags; an unknown flag is a usage
// error naming the closest.
func TestMigrateUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"help", "migrate"}, nil, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "--dialers") {
		t.Errorf("help: exit %d, %s", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"migrate", "--dialer"}, nil, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "did you mean --dialers?") {
		t.Errorf("--dialer: exit %d, %s", code, stderr.String())
	}
}

// TestMigrateREADME: the README's example is what migrate prints on
// internal/migrate/testdata/corpus/readme, run there with -C: the lines
// after its command end the output.
func TestMigrateREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "$ azkafka migrate ./...\n"
	_, after, ok := strings.Cut(string(b), "```console\n"+cmd)
	block, _, closed := strings.Cut(after, "```\n")
	if !ok || !closed {
		t.Fatalf("README.md has no console block starting %q", cmd)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"migrate", "-C", "../../internal/migrate/testdata/corpus/readme", "./..."}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String() + stderr.String()
	if !strings.HasSuffix(out, block) || !strings.HasPrefix(out, "--- a/events/events.go\n") {
		t.Errorf("README.md shows:\n%s\nmigrate prints:\n%s", block, out)
	}
}

// TestMigrateChdirNotADirectory: -C names a directory.
func TestMigrateChdirNotADirectory(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"migrate", "-C", "migrate.go"}, nil, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "-C migrate.go: not a directory") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}

// TestMigrateGoMod: migrate -w -C on a module of its own makes it require
// the SDK's module (its replace directive naming this checkout), so that
// it builds with the go command's defaults (-mod=readonly); without a
// version to take, the last line is the command to run.
func TestMigrateGoMod(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and builds a module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOPROXY", "off") // the module cache has what the SDK needs
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "-mod=readonly")
	gomod := "module example.com/svc\n\ngo 1.26.0\n\nrequire github.com/segmentio/kafka-go v0.4.51\n\n" +
		"require (\n\tgithub.com/klauspost/compress v1.20.3 // indirect\n\tgithub.com/pierrec/lz4/v4 v4.1.33 // indirect\n)\n"
	const src = "package main\n\nimport \"github.com/segmentio/kafka-go\"\n\nfunc main() {\n\tw := &kafka.Writer{Addr: kafka.TCP(\"localhost:9092\"), Topic: \"t\"}\n\tdefer w.Close()\n}\n"
	module := func(t *testing.T, extra string) string {
		d := t.TempDir()
		for name, b := range map[string]string{"go.mod": gomod + extra, "go.sum": string(sum), "main.go": src} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	t.Run("replace", func(t *testing.T) {
		d := module(t, "\nreplace github.com/azkafka/azkafka => "+root+"\n")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"migrate", "-C", d, "-w", "./..."}, nil, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "example.com/svc: ran go get github.com/azkafka/azkafka/sdk\n") {
			t.Errorf("stderr: %s", stderr.String())
		}
		build := exec.Command("go", "build", "./...")
		build.Dir = d
		if out, err := build.CombinedOutput(); err != nil {
			b, _ := os.ReadFile(filepath.Join(d, "go.mod"))
			t.Fatalf("go build after migrate -w: %v\n%s\ngo.mod:\n%s", err, out, b)
		}
	})
	t.Run("no version", func(t *testing.T) {
		d := module(t, "")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"migrate", "-C", d, "-w", "./..."}, nil, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, "go get github.com/azkafka/azkafka/sdk@") {
			t.Errorf("the last line is %q, want the go get command; stderr:\n%s", last, stderr.String())
		}
	})
}
