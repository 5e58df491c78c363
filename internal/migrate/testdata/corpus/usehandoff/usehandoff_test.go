package usehandoff

import "testing"

func TestLabel(t *testing.T) {
	if got := Label([]string{"127.0.0.1:1"}); got != "instrumented t t" {
		t.Fatalf("Label = %q", got)
	}
}
