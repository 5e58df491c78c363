package shadow

import "testing"

func TestNewAndOpen(t *testing.T) {
	New("t").Close()
	Open([]string{"127.0.0.1:1"}).Close()
}
