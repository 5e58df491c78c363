package runtimepanic

import "testing"

func TestWriters(t *testing.T) {
	if w := Traced([]string{"127.0.0.1:1"}); w == nil || Lazy == nil {
		t.Fatal("no Writer")
	}
}
