package azdetect

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// azPattern is the rule from the specification, as a regular expression:
// an independent oracle for the hand-written check.
var azPattern = regexp.MustCompile(`^[a-z0-9-]{1,128}$`)

func TestValidate(t *testing.T) {
	tests := []struct {
		in, want string
		errIn    string
	}{
		{in: "us-east-1a", want: "us-east-1a"},
		{in: "  euw1-az3\n", want: "euw1-az3"},
		{in: "eastus-1", want: "eastus-1"},
		{in: "us-central1-f", want: "us-central1-f"},
		{in: strings.Repeat("z", 128), want: strings.Repeat("z", 128)},
		{in: "", errIn: "empty"},
		{in: " \t\n", errIn: "empty"},
		{in: strings.Repeat("z", 129), errIn: "129 bytes, longer than 128"},
		{in: "us-east-1a,warpstream_interzone_lb=false", errIn: `AZ "us-east-1a,warpstream_interzone_lb=false": invalid AZ: byte "," at offset 10`},
		{in: "a=b", errIn: `byte "=" at offset 1`},
		{in: "US-EAST-1A", errIn: `byte "U" at offset 0`},
		{in: "us east", errIn: `byte " " at offset 2`},
		{in: "us_east", errIn: `byte "_"`},
		{in: "zöne", errIn: `byte "\xc3" at offset 1`},
		{in: "a\x00", errIn: `byte "\x00" at offset 1`},
		{in: strings.Repeat("x,", 100), errIn: `"...(200 bytes)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Validate(tt.in)
			if tt.errIn != "" {
				if err == nil || !errors.Is(err, ErrInvalidAZ) || !strings.Contains(err.Error(), tt.errIn) {
					t.Fatalf("Validate(%q) = %q, %v; want ErrInvalidAZ containing %q", tt.in, got, err, tt.errIn)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Validate(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{"us-east-1a", " euw1-az3 ", "", "a,b=c", "US", strings.Repeat("a", 129), "\xff", "eastus-1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Validate(in)
		want := azPattern.MatchString(strings.TrimSpace(in))
		if (err == nil) != want {
			t.Fatalf("Validate(%q) = %q, %v; the pattern says valid=%v", in, got, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidAZ) {
				t.Fatalf("error %v does not match ErrInvalidAZ", err)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error message of %d bytes: the value is not truncated", len(err.Error()))
			}
			return
		}
		if got != strings.TrimSpace(in) || strings.ContainsAny(got, ",= ") {
			t.Fatalf("Validate(%q) = %q", in, got)
		}
	})
}

func FuzzParseECSTask(f *testing.F) {
	f.Add([]byte(ecsTask("eu-west-1c")))
	f.Add([]byte(`{"AvailabilityZone":""}`))
	f.Add([]byte(`{"AvailabilityZone":null}`))
	f.Add([]byte(`{"AvailabilityZone":"a"} {}`))
	f.Add([]byte(`<html></html>`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		az, err := parseECSTask(body, FormatName)
		if err != nil {
			return
		}
		if az == "" || !json.Valid(body) {
			t.Fatalf("parseECSTask(%q) = %q: accepted an empty zone or invalid JSON", body, az)
		}
		if _, err := parseECSTask(body, FormatID); !errors.Is(err, ErrNoZone) {
			t.Fatalf("parseECSTask(%q, id) = %v, want ErrNoZone: task metadata has no zone ID", body, err)
		}
	})
}

func FuzzParseNode(f *testing.F) {
	f.Add([]byte(`{"kind":"Node","metadata":{"name":"n1","labels":{"topology.kubernetes.io/zone":"us-east-2a"}}}`))
	f.Add([]byte(`{"kind":"PartialObjectMetadata","metadata":{"name":"n1","labels":{}}}`))
	f.Add([]byte(`{"kind":"Status","code":403}`))
	f.Add([]byte(`{"kind":"Node","metadata":{"name":"n2","labels":{"topology.kubernetes.io/zone":"x"}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		az, err := parseNode(body, "n1", labelZone)
		if err != nil {
			return
		}
		var node struct {
			Kind     string
			Metadata struct {
				Name   string
				Labels map[string]any
			}
		}
		if jerr := json.Unmarshal(body, &node); jerr != nil {
			t.Fatalf("parseNode accepted %q, which encoding/json rejects: %v", body, jerr)
		}
		if az == "" || node.Metadata.Name != "n1" {
			t.Fatalf("parseNode(%q) = %q for node %q", body, az, node.Metadata.Name)
		}
		if v, ok := node.Metadata.Labels[labelZone].(string); ok && v != az {
			t.Fatalf("parseNode = %q, the label says %q", az, v)
		}
	})
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{"us-east-1a", "projects/1/zones/us-east1-b", "", "<html>", "a\nb", "\xff", " eastus \n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := parseText(body)
		if err == nil {
			if s == "" || s != strings.TrimSpace(s) || strings.ContainsAny(s, "\r\n") ||
				!utf8.ValidString(s) || strings.HasPrefix(s, "<") {
				t.Fatalf("parseText(%q) = %q", body, s)
			}
		}
		zone, err := parseGCPZone(string(body))
		if err == nil {
			full := strings.TrimSpace(string(body))
			if !strings.HasPrefix(full, "projects/") || !strings.HasSuffix(full, "/zones/"+zone) || strings.Contains(zone, "/") {
				t.Fatalf("parseGCPZone(%q) = %q", body, zone)
			}
		}
	})
}
