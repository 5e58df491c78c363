package metrics

import "testing"

// TestNames: every value of every enum has its own name, and a value out
// of range says so.
func TestNames(t *testing.T) {
	for _, set := range []struct {
		name  string
		names []string
	}{
		{"Kind", []string{KindWriter.String(), KindReader.String(), KindDialer.String(), KindTransport.String(), KindIQ.String()}},
		{"CloseCause", []string{CloseLocal.String(), ClosePeer.String(), ClosePeerEarly.String(), CloseLocalEarly.String()}},
		{"WaitReason", []string{WaitLimiter.String(), WaitRedial.String()}},
		{"ResendCause", []string{ResendConnection.String(), ResendStored.String()}},
		{"Op", []string{OpFetch.String(), OpCommit.String(), OpListOffsets.String()}},
		{"QueryOutcome", []string{QueryOK.String(), QueryNoReplica.String(), QueryFailed.String(), QueryCanceled.String()}},
		{"Copy", []string{CopyNone.String(), CopyActive.String(), CopyStandbyInZone.String(), CopyStandbyOtherZone.String()}},
	} {
		seen := map[string]bool{}
		for _, n := range set.names {
			if n == "" || n == "unknown" || seen[n] {
				t.Errorf("%s: name %q empty, unknown or repeated in %v", set.name, n, set.names)
			}
			seen[n] = true
		}
	}
	if got := Kind(0).String(); got != "" {
		t.Errorf("Kind(0) = %q, want \"\"", got)
	}
	if got := CloseCause(200).String(); got != "unknown" {
		t.Errorf("CloseCause(200) = %q, want unknown", got)
	}
}
