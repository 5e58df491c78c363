package azsim

import (
	"strings"
	"testing"
)

// FuzzParseClientID checks that the parser never panics and agrees with a
// client ID rebuilt from what it found: appending the pairs it reported
// to any ID yields the same answer.
func FuzzParseClientID(f *testing.F) {
	for _, s := range []string{"", "app", "warpstream_az=az-b", "ws_az=x,warpstream_interzone_lb=true",
		"a,warpstream_session_id=1,warpstream_az=us-east-1a,warpstream_interzone_lb=true", ",,=,==,ws_az==", "warpstream_az=\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ci := ParseClientID(id)
		if strings.Contains(ci.AZ, ",") {
			t.Fatalf("AZ %q contains a separator", ci.AZ)
		}
		if ci.AZ == "" {
			return
		}
		lb := "false"
		if ci.InterzoneLB {
			lb = "true"
		}
		again := ParseClientID(id + "," + KeyAZ + "=" + ci.AZ + "," + KeyInterzoneLB + "=" + lb)
		if again != ci {
			t.Fatalf("ParseClientID(%q) = %+v, but with its own pairs appended: %+v", id, ci, again)
		}
	})
}
