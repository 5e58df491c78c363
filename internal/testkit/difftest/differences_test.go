package difftest

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the sdk package doc's Differences section from the table")

const sdkDoc = "../../../sdk/doc.go"

// TestDifferencesInSDKDoc checks that the sdk package doc's "Differences
// from kafka-go" section is the table of Differences; -update rewrites it.
func TestDifferencesInSDKDoc(t *testing.T) {
	b, err := os.ReadFile(sdkDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const head = "// # Differences from kafka-go\n"
	start := strings.Index(doc, head)
	if start < 0 {
		t.Fatalf("%s has no %q section", sdkDoc, strings.TrimSpace(head))
	}
	end := strings.Index(doc[start+len(head):], "\n// # ")
	if end < 0 {
		t.Fatalf("%s: the Differences section must be followed by another section", sdkDoc)
	}
	end += start + len(head) + 1
	// The section ends with the blank comment line before the next one.
	got, want := doc[start:end], DocSection()+"//\n"
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(sdkDoc, []byte(doc[:start]+want+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's Differences section differs from the table; run go test ./internal/testkit/difftest -run TestDifferencesInSDKDoc -update\ngot:\n%s\nwant:\n%s", sdkDoc, got, want)
}

// TestDifferenceRowsAreComplete checks that every row says what and why
// and covers some scenario.
func TestDifferenceRowsAreComplete(t *testing.T) {
	names := map[string]bool{}
	for _, sc := range Scenarios() {
		names[sc.Name] = true
	}
	seen := map[string]bool{}
	for _, row := range Differences {
		if row.ID == "" || row.What == "" || row.Why == "" || row.Step == "" {
			t.Errorf("row %q: ID, What, Why and Step are all needed", row.ID)
		}
		if seen[row.ID] {
			t.Errorf("row %q twice", row.ID)
		}
		seen[row.ID] = true
		covers := false
		for name := range names {
			covers = covers || glob(row.Scenario, name)
		}
		if !covers {
			t.Errorf("row %q: its scenario pattern %q matches no scenario", row.ID, row.Scenario)
		}
	}
}

// TestGlob checks the row patterns' matching.
func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"reader/*", "reader/partition/fields", true},
		{"*/broker-goes-away", "writer/broker-goes-away", true},
		{"writer/canceled-*", "writer/canceled-before", true},
		{"writer/canceled-*", "reader/canceled-before", false},
		{"ReadLag after Close", "ReadLag after Close", true},
		{"ReadLag after Close", "ReadLag after Close again", false},
		{"a.b", "axb", false},
		{"ReadLag*|Lag after fetching", "Lag after fetching", true},
		{"ReadLag*|Lag after fetching", "ReadLag value", true},
		{"ReadLag*|Lag after fetching", "Lag after fetching again", false},
	} {
		if got := glob(tc.pattern, tc.s); got != tc.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
