package handoff

import "testing"

func TestNew(t *testing.T) {
	w, label := New([]string{"127.0.0.1:1"}, "t")
	defer w.Close()
	if label != "instrumented t t" {
		t.Fatalf("label %q", label)
	}
}
