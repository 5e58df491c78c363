package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/azkafka/azkafka/internal/iqinspect"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/iq"
)

// fakeStreamsApp serves iq metadata documents for two instances on loopback:
// a (az-a) active for partition 0 of "in" (3 partitions) and standby for 2;
// b (az-b) active for 1 and 2, standby for 0 with lag 7.
func fakeStreamsApp(t *testing.T, noInstances bool) string {
	t.Helper()
	var hosts [2]string
	var ports [2]int
	doc := func(i int) string {
		insts := fmt.Sprintf(`{"host":%q,"port":%d,"activeStores":["counts"],"activePartitions":{"in":[0]},"standbyStores":["counts"],"standbyPartitions":{"in":[2]}},
			{"host":%q,"port":%d,"activeStores":["counts"],"activePartitions":{"in":[1,2]},"standbyStores":["counts"],"standbyPartitions":{"in":[0]}}`,
			hosts[0], ports[0], hosts[1], ports[1])
		if noInstances {
			insts = ""
		}
		lags := []string{`"0":{"current":50,"end":50,"lag":0},"2":{"current":1,"end":20001,"lag":20000}`,
			`"0":{"current":43,"end":50,"lag":7},"1":{"current":9,"end":9,"lag":0},"2":{"current":3,"end":3,"lag":0}`}[i]
		return fmt.Sprintf(`{"version":1,"self":{"host":%q,"port":%d},"az":"az-%c","state":"RUNNING","stores":{"counts":["in"]},"topics":{"in":3},"instances":[%s],"lags":{"counts":{%s}}}`,
			hosts[i], ports[i], 'a'+i, insts, lags)
	}
	var urls [2]string
	for i := range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, doc(i))
		}))
		t.Cleanup(srv.Close)
		h, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
		hosts[i] = h
		ports[i], _ = strconv.Atoi(p)
		urls[i] = srv.URL + "/azkafka/iq/metadata"
	}
	return urls[0]
}

func TestIQRouteCommand(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		empty   bool
		code    int
		wantOut []string
		wantErr []string
	}{
		{"active only", []string{"KH01"}, nil, false, exitOK,
			[]string{`key "KH01": partition 0`, "active:   127.0.0.1:", " az az-a lag 0 (current 50, end 50)", "az az-b lag 7 (current 43, end 50)", "policy:   active only", "order 1:", "(active)"}, nil},
		{"standby allowed, zone b", []string{"--allow-standby", "--az", "az-b", "KH01"}, nil, false, exitOK,
			[]string{"standbys allowed, max lag 10000, caller zone az-b", "order 1:", "order 2:", "(standby)"}, nil},
		{"env enables standby", []string{"--az", "", "KH01"}, map[string]string{"AZKAFKA_IQ_ALLOW_STANDBY": "TRUE"}, false, exitOK,
			[]string{"standbys allowed", "caller zone unknown", "order 2:"}, nil},
		{"flag beats env", []string{"--allow-standby=false", "KH01"}, map[string]string{"AZKAFKA_IQ_ALLOW_STANDBY": "true"}, false, exitOK,
			[]string{"policy:   active only"}, nil},
		{"far standby excluded", []string{"--allow-standby", "--az", "az-a", "--max-lag", "100", "KH07"}, nil, false, exitOK,
			[]string{"partition 2", "lag 20000 (current 1, end 20001)", "order 1:"}, nil},
		{"not available", []string{"KH01"}, nil, true, exitFail,
			[]string{"active:   none (not available"}, []string{"routing metadata not available"}},
		{"unknown store", []string{"--store", "nope", "KH01"}, nil, false, exitFail, nil, []string{`iq: store "nope": unknown store`}},
		{"bad env", []string{"KH01"}, map[string]string{"AZKAFKA_IQ_MAX_LAG": "lots"}, false, exitUsage, nil, []string{`AZKAFKA_IQ_MAX_LAG="lots": not a non-negative integer`}},
		{"bad max lag", []string{"--max-lag", "-3", "KH01"}, nil, false, exitUsage, nil, []string{`--max-lag "-3"`}},
		{"two keys", []string{"KH01", "KH02"}, nil, false, exitUsage, nil, []string{"exactly one KEY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := fakeStreamsApp(t, tt.empty)
			iqLookupEnv = noEnv
			if tt.env != nil {
				iqLookupEnv = func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			}
			t.Cleanup(func() { iqLookupEnv = noEnv })
			args := append([]string{"iq", "route", "--metadata-url", url, "--store", "counts"}, tt.args...)
			var out, errb bytes.Buffer
			code := run(args, nil, &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out.String(), errb.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if strings.HasPrefix(tt.name, "far standby") && strings.Contains(out.String(), "order 2:") {
				t.Errorf("standby with lag 20000 > 100 chosen:\n%s", out.String())
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}
}

func TestIQRouteCommandJSON(t *testing.T) {
	iqLookupEnv = func(string) (string, bool) { return "", false }
	url := fakeStreamsApp(t, false)
	var out, errb bytes.Buffer
	code := run([]string{"iq", "route", "--json", "--metadata-url", url, "--store", "counts", "--allow-standby", "--az", "az-b", "--max-lag", "100", "KH07"}, nil, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc routeOutput
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	// KH07 is partition 2 of 3: active b (lag 0, az-b), standby a (lag 20000 > 100).
	if doc.Partition != 2 || doc.Active == nil || doc.Active.AZ != "az-b" || doc.Active.Lag == nil || doc.Active.Lag.Lag != 0 {
		t.Fatalf("route = %+v", doc)
	}
	if len(doc.Standbys) != 1 || doc.Standbys[0].AZ != "az-a" || doc.Standbys[0].Lag.Lag != 20000 || doc.Standbys[0].Role != "standby" {
		t.Errorf("standbys = %+v", doc.Standbys)
	}
	if len(doc.Order) != 1 || doc.Order[0].Role != "active" || !doc.AllowStandby || doc.MaxLag != 100 || doc.CallerAZ != "az-b" || doc.Error != "" {
		t.Errorf("order/policy = %+v", doc)
	}
}

func TestIQCommandUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"iq"}, exitUsage, "want a subcommand: route or describe"},
		{[]string{"iq", "frob"}, exitUsage, `unknown subcommand "frob"`},
		{[]string{"help", "iq"}, exitOK, "queryMetadataForKey"},
		{[]string{"iq", "route", "KH01"}, exitUsage, "--bootstrap and --application-id, or --metadata-url, are required"},
		{[]string{"iq", "route", "--bootstrap", "h:9092", "--store", "s", "KH01"}, exitUsage, "--application-id is required with --bootstrap"},
		{[]string{"iq", "route", "--bootstrap", "h:9092", "--metadata-url", "http://h:1/m", "--store", "s", "KH01"}, exitUsage, "give one source"},
		{[]string{"iq", "route", "--bootstrap", "h", "--application-id", "app", "--store", "s", "KH01"}, exitUsage, `broker "h": want host:port`},
		{[]string{"iq", "route", "--store-topics", "joined", "KH01"}, exitUsage, `"joined": want STORE=TOPIC[,TOPIC...]`},
		{[]string{"iq", "describe"}, exitUsage, "--bootstrap is required"},
		{[]string{"iq", "describe", "--bootstrap", "h:1"}, exitUsage, "--application-id is required"},
		{[]string{"iq", "describe", "--bootstrap", "h:1", "--application-id", "a", "extra"}, exitUsage, "unexpected arguments"},
		{[]string{"iq", "route", "--metadata-url", "http://127.0.0.1:1/m", "KH01"}, exitUsage, "--store is required"},
		{[]string{"iq", "route", "--metadata-url", "ftp://x", "--store", "s", "KH01"}, exitUsage, `metadata URL "ftp://x"`},
		{[]string{"iq", "route", "--metadata-url", "http://127.0.0.1:1/m", "--store", "s", "--timeout", "300ms", "--az", "", "KH01"}, exitFail, "127.0.0.1:1/m"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(tt.args, nil, &out, &errb)
		if code != tt.code || !strings.Contains(out.String()+errb.String(), tt.want) {
			t.Errorf("%v: exit %d, output %q; want %d and %q", tt.args, code, out.String()+errb.String(), tt.code, tt.want)
		}
	}
}

// TestIQDescribeCommandNoGroup runs describe and route against the embedded
// broker, where the application's group does not exist: both fail with an
// error naming the group.
func TestIQDescribeCommandNoGroup(t *testing.T) {
	c := embedded.StartT(t)
	for _, args := range [][]string{
		{"iq", "describe", "--bootstrap", c.Addrs()[0], "--application-id", "no-such-app"},
		{"iq", "route", "--bootstrap", c.Addrs()[0], "--application-id", "no-such-app", "--store", "s", "KH01"},
	} {
		var out, errb bytes.Buffer
		code := run(args, nil, &out, &errb)
		if code != exitFail || !strings.Contains(errb.String(), `group "no-such-app"`) || !strings.Contains(errb.String(), "is the application.id right") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

func TestIQDescribeOutput(t *testing.T) {
	g := &iqinspect.Group{ApplicationID: "app", Protocol: "classic", State: "Stable",
		Members:          []iqinspect.Member{{MemberID: "m-1", ClientID: "c-1", ProcessID: "p-1", Endpoint: "10.0.0.1:7070", RackID: "az-a", AZ: "az-a"}},
		StoreSubtopology: map[string]string{"counts": "0"}}
	md := iq.Metadata{
		StoreSourceTopics: map[string][]string{"counts": {"in"}},
		TopicPartitions:   map[string]int{"in": 2},
		UnmappedStores:    map[string]string{"leftcount": "subtopology 2 reads topics of different partition counts"},
		Instances: []iq.Instance{{HostInfo: iq.HostInfo{Host: "10.0.0.1", Port: 7070}, AZ: "az-a",
			ActivePartitions: []iq.TopicPartition{{Topic: "in", Partition: 0}}, StandbyPartitions: []iq.TopicPartition{{Topic: "in", Partition: 1}},
			Lags: map[string]map[int]iq.Lag{"counts": {1: {Current: 5, End: 12, Lag: 7, Bound: true}}}}},
	}
	var b bytes.Buffer
	printDescribe(&b, describe(g, md))
	for _, want := range []string{
		"application app: classic protocol, group Stable, 1 members, 1 instances",
		"store counts: source topics in (2), subtopology 0",
		"store leftcount: not routable: subtopology 2 reads topics of different partition counts",
		"instance 10.0.0.1:7070 az az-a\n  counts: active [0], standby [1 (lag <=7)]",
		`member m-1: client c-1, process p-1, endpoint 10.0.0.1:7070, rack "az-a"`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	j, _ := json.Marshal(describe(g, md))
	if !strings.Contains(string(j), `"lags":{"counts":{"1":{"current":5,"end":12,"lag":7,"bound":true}}}`) {
		t.Errorf("JSON: %s", j)
	}
}
