package newwriter

import "testing"

func TestNew(t *testing.T) {
	if err := New([]string{"127.0.0.1:1"}, "t").Close(); err != nil {
		t.Fatal(err)
	}
}
