package outsideapi

import "testing"

func TestWire(t *testing.T) {
	w, topics := Wire([]string{"127.0.0.1:1"})
	defer w.Close()
	if len(topics) != 1 || topics[0] != "audit" || Default() != w {
		t.Fatalf("topics %v", topics)
	}
}
