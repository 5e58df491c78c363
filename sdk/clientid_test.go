package sdk

import (
	"strings"
	"testing"
)

const sid = "0b8e4b1e-5d2a-4c3f-9f1e-2a6b7c8d9e0f"

func TestClientIDFormat(t *testing.T) {
	tests := []struct {
		name string
		p    ClientIDParts
		want string
	}{
		{"full", ClientIDParts{SessionID: sid, AZ: "us-east-1a", InterzoneLB: true},
			"warpstream_session_id=" + sid + ",warpstream_az=us-east-1a,warpstream_interzone_lb=true"},
		{"user first", ClientIDParts{UserID: "billing-api", SessionID: sid, AZ: "use1-az4", InterzoneLB: true},
			"billing-api,warpstream_session_id=" + sid + ",warpstream_az=use1-az4,warpstream_interzone_lb=true"},
		{"unknown AZ omitted", ClientIDParts{UserID: "app", SessionID: sid, InterzoneLB: true},
			"app,warpstream_session_id=" + sid + ",warpstream_interzone_lb=true"},
		{"interzone off omitted", ClientIDParts{SessionID: sid, AZ: "1"},
			"warpstream_session_id=" + sid + ",warpstream_az=1"},
		{"user pairs replaced, not duplicated", ClientIDParts{
			UserID:    "app,warpstream_az=eu-west-1b,team=pay,ws_host_override=x,WarpStream_Session_ID=old,warpstream_interzone_lb=false",
			SessionID: sid, AZ: "us-east-1a", InterzoneLB: true},
			"app,team=pay,warpstream_session_id=" + sid + ",warpstream_az=us-east-1a,warpstream_interzone_lb=true"},
		{"user ID made only of SDK pairs", ClientIDParts{UserID: "warpstream_az=x", SessionID: sid},
			"warpstream_session_id=" + sid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ClientID(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("ClientID =\n %s\nwant\n %s", got, tt.want)
			}
			if n := strings.Count(got, "warpstream_az="); n > 1 {
				t.Fatalf("warpstream_az appears %d times", n)
			}
		})
	}
}

func TestClientIDRejects(t *testing.T) {
	tests := []struct {
		name    string
		p       ClientIDParts
		wantErr string
	}{
		{"no session", ClientIDParts{}, "session ID"},
		{"upper-case session", ClientIDParts{SessionID: strings.ToUpper(sid)}, "not a UUID"},
		{"session with comma", ClientIDParts{SessionID: sid[:35] + ","}, "not a UUID"},
		{"AZ with comma", ClientIDParts{SessionID: sid, AZ: "us-east-1a,warpstream_az=x"}, `AZ "us-east-1a,warpstream_az=x"`},
		{"AZ with equals", ClientIDParts{SessionID: sid, AZ: "a=b"}, `AZ "a=b"`},
		{"AZ with space", ClientIDParts{SessionID: sid, AZ: " us-east-1a"}, "AZ"},
		{"user segment with two '='", ClientIDParts{UserID: "app,k=v=w", SessionID: sid}, `"k=v=w"`},
		{"user empty segment", ClientIDParts{UserID: "app,,x", SessionID: sid}, "empty segment"},
		{"user empty key", ClientIDParts{UserID: "=v", SessionID: sid}, `"=v"`},
		{"user control char", ClientIDParts{UserID: "app\n", SessionID: sid}, "control character"},
		{"user invalid UTF-8", ClientIDParts{UserID: "app\xff", SessionID: sid}, "UTF-8"},
		{"too long", ClientIDParts{UserID: strings.Repeat("a", MaxClientIDLen), SessionID: sid}, "longer than Kafka's limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ClientID(tt.p)
			if err == nil {
				t.Fatalf("ClientID = %q, want an error", got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseClientID(t *testing.T) {
	tests := []struct {
		in      string
		want    ClientIDParts
		wantErr string
	}{
		{in: "app,warpstream_session_id=" + sid + ",warpstream_az=us-east-1a,warpstream_interzone_lb=true",
			want: ClientIDParts{UserID: "app", SessionID: sid, AZ: "us-east-1a", InterzoneLB: true}},
		{in: "a,b=c,warpstream_interzone_lb=false,warpstream_session_id=" + sid,
			want: ClientIDParts{UserID: "a,b=c", SessionID: sid}},
		{in: "", wantErr: "empty"},
		{in: "app", wantErr: "no warpstream_session_id"},
		{in: "warpstream_session_id=" + sid + ",warpstream_session_id=" + sid, wantErr: "duplicated"},
		{in: "warpstream_session_id=" + sid + ",app", wantErr: "after the SDK pairs"},
		{in: "warpstream_session_id=" + sid + ",ws_az=x", wantErr: `unknown key "ws_az"`},
		{in: "warpstream_session_id=nope", wantErr: "not a UUID"},
		{in: "warpstream_session_id=" + sid + ",warpstream_az=", wantErr: "warpstream_az"},
		{in: "warpstream_session_id=" + sid + ",warpstream_interzone_lb=yes", wantErr: "want true or false"},
		{in: "a=b=c,warpstream_session_id=" + sid, wantErr: "one key=value"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseClientID(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseClientID = %+v, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("ParseClientID = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzParseClientID checks that anything ParseClientID accepts rebuilds
// into an ID that parses to the same parts, and that the rebuilt ID has
// each SDK key at most once, as the agent's ','/'=' split needs.
func FuzzParseClientID(f *testing.F) {
	for _, s := range []string{
		"app,warpstream_session_id=" + sid + ",warpstream_az=us-east-1a,warpstream_interzone_lb=true",
		"warpstream_session_id=" + sid,
		"a,b=c,warpstream_interzone_lb=false,warpstream_session_id=" + sid,
		"ws_az=x,warpstream_session_id=" + sid,
		"app,,warpstream_session_id=" + sid,
		"",
		"=",
		",",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseClientID(s)
		if err != nil {
			return
		}
		id, err := ClientID(p)
		if err != nil {
			t.Fatalf("ParseClientID(%q) = %+v, but ClientID rejects it: %v", s, p, err)
		}
		q, err := ParseClientID(id)
		if err != nil {
			t.Fatalf("ClientID(%+v) = %q does not parse: %v", p, id, err)
		}
		if q != p {
			t.Fatalf("round trip changed the parts: %+v -> %q -> %+v", p, id, q)
		}
		for _, k := range []string{keySessionID + "=", keyAZ + "=", keyInterzoneLB + "="} {
			if strings.Count(","+id, ","+k) > 1 {
				t.Fatalf("%q has %s more than once", id, k)
			}
		}
	})
}

// FuzzClientID builds IDs from arbitrary parts: either an error, or an ID
// that parses back to the parts (user segments cleaned of SDK pairs).
func FuzzClientID(f *testing.F) {
	f.Add("app", sid, "us-east-1a", true)
	f.Add("app,warpstream_az=x,k=v", sid, "", false)
	f.Add("", "x", "a,b", true)
	f.Fuzz(func(t *testing.T, user, session, az string, lb bool) {
		p := ClientIDParts{UserID: user, SessionID: session, AZ: az, InterzoneLB: lb}
		id, err := ClientID(p)
		if err != nil {
			return
		}
		q, err := ParseClientID(id)
		if err != nil {
			t.Fatalf("ClientID(%+v) = %q does not parse: %v", p, id, err)
		}
		clean, _ := cleanUserID(user)
		if q.UserID != clean || q.SessionID != session || q.AZ != az || q.InterzoneLB != lb {
			t.Fatalf("%+v -> %q -> %+v", p, id, q)
		}
	})
}

func BenchmarkClientID(b *testing.B) {
	p := ClientIDParts{UserID: "billing-api,team=pay", SessionID: sid, AZ: "us-east-1a", InterzoneLB: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ClientID(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseClientID(b *testing.B) {
	s := "billing-api,team=pay,warpstream_session_id=" + sid + ",warpstream_az=us-east-1a,warpstream_interzone_lb=true"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseClientID(s); err != nil {
			b.Fatal(err)
		}
	}
}
