package stats

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestCollect(t *testing.T) {
	w := &kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), Topic: "t"}
	defer w.Close()
	n, tot := Collect(w)
	if n != 2 || len(tot.History) != 2 || tot.History[0].Messages != 1 || Empty("t").Topic != "t" {
		t.Fatalf("Collect = %d, %+v", n, tot)
	}
}
