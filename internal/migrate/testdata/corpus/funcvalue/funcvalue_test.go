package funcvalue

import "testing"

func TestOpen(t *testing.T) {
	a, b := Open([]string{"127.0.0.1:1"}, "t")
	a.Close()
	b.Close()
}
