package iq

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// docJSON is a document as the Java handler writes it.
const docJSON = `{"version":1,"self":{"host":"127.0.0.1","port":7001},"az":"az1","state":"RUNNING",
"stores":{"counts":["in"]},"topics":{"in":3},
"instances":[
 {"host":"127.0.0.1","port":7001,"activeStores":["counts"],"activePartitions":{"in":[0]},"standbyStores":["counts"],"standbyPartitions":{"in":[2]}},
 {"host":"127.0.0.1","port":7002,"activeStores":["counts"],"activePartitions":{"in":[1,2]},"standbyStores":["counts"],"standbyPartitions":{"in":[0]}}],
"lags":{"counts":{"0":{"current":10,"end":10,"lag":0},"2":{"current":4,"end":9,"lag":5}}},
"futureField":{"ignored":true}}`

func TestParseDocumentAndMerge(t *testing.T) {
	d, err := parseDocument("http://127.0.0.1:7001/m", []byte(docJSON))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := newSnapshot(mergeDocuments(d, []*document{d}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := snap.Route("counts", []byte("KH07")) // partition 2 of 3
	if err != nil {
		t.Fatal(err)
	}
	if r.Partition != 2 || r.Active.Port != 7002 || r.Active.LagKnown || len(r.Standbys) != 1 {
		t.Fatalf("route = %+v", r)
	}
	if sb := r.Standbys[0]; sb.Port != 7001 || sb.AZ != "az1" || sb.Lag != (Lag{4, 9, 5, false}) {
		t.Errorf("standby = %+v, want 7001 in az1 with lag {4 9 5}", sb)
	}
}

func TestParseDocumentErrors(t *testing.T) {
	mutate := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(docJSON), &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	inst := func(m map[string]any, i int) map[string]any { return m["instances"].([]any)[i].(map[string]any) }
	tests := []struct {
		name, body, want string
	}{
		{"not JSON", `<html>`, "invalid metadata JSON"},
		{"trailing", docJSON + `{}`, "trailing data"},
		{"wrong type", mutate(func(m map[string]any) { m["topics"] = []int{1} }), "invalid metadata JSON"},
		{"version", mutate(func(m map[string]any) { m["version"] = 2 }), "field version: got 2, want 1"},
		{"no self", mutate(func(m map[string]any) { delete(m, "self") }), "field self.host: missing"},
		{"no state", mutate(func(m map[string]any) { delete(m, "state") }), "field state: missing"},
		{"store without topics", mutate(func(m map[string]any) { m["stores"] = map[string]any{"counts": []string{}} }), `field stores["counts"]: no source topics`},
		{"zero partitions", mutate(func(m map[string]any) { m["topics"] = map[string]any{"in": 0} }), `field topics["in"]: partition count 0`},
		{"bad port", mutate(func(m map[string]any) { inst(m, 1)["port"] = 70000 }), "field instances[1].port: 70000 out of range"},
		{"duplicate", mutate(func(m map[string]any) { inst(m, 1)["port"] = 7001 }), "field instances[1]: duplicate instance 127.0.0.1:7001"},
		{"negative partition", mutate(func(m map[string]any) { inst(m, 0)["standbyPartitions"] = map[string]any{"in": []int{-1}} }), `field instances[0].standbyPartitions["in"][0]: partition -1`},
		{"lag key", mutate(func(m map[string]any) { m["lags"] = map[string]any{"counts": map[string]any{"x": map[string]any{}}} }), `field lags["counts"]["x"]: not a partition number`},
		{"negative lag", mutate(func(m map[string]any) {
			m["lags"] = map[string]any{"counts": map[string]any{"1": map[string]any{"lag": -3}}}
		}), `field lags["counts"]["1"]: negative offset`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseDocument("http://h:1/meta", []byte(tt.body))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "http://h:1/meta") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want source and %q", err, tt.want)
			}
		})
	}
}

func FuzzParseDocument(f *testing.F) {
	f.Add([]byte(docJSON))
	f.Add([]byte(`{"version":1,"self":{"host":"h","port":1},"state":"REBALANCING","stores":{},"topics":{},"instances":[],"lags":{}}`))
	f.Add([]byte(`{"version":1,"self":{"host":"h","port":1},"state":"RUNNING","stores":{"s":["t","u"]},"topics":{"t":65536,"u":2},"instances":[{"host":"h","port":1,"activeStores":["s"],"activePartitions":{"u":[65535]}}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"version":1e99}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := parseDocument("fuzz", body)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "iq: fuzz: ") {
				t.Fatalf("error does not name its source: %v", err)
			}
			return
		}
		snap, err := newSnapshot(mergeDocuments(d, []*document{d}))
		if err != nil {
			return // e.g. an instance listed twice after merge is reported, not a panic
		}
		for store := range d.Stores {
			r, err := snap.Route(store, body)
			if err == nil && (r.Active == nil || r.Partition < 0) {
				t.Fatalf("route without error but no active: %+v", r)
			}
			if err != nil && !errors.Is(err, ErrNotAvailable) {
				t.Fatalf("unexpected route error: %v", err)
			}
		}
	})
}
