package main

import (
	"bytes"
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
