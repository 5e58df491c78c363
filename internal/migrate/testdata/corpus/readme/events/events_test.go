package events

import "testing"

func TestOpen(t *testing.T) {
	w, r := Open([]string{"127.0.0.1:1"})
	w.Close()
	r.Close()
}
