package iq

import (
	"slices"
	"strings"
	"testing"

	"github.com/azkafka/azkafka/internal/envcheck"
)

// TestEnvcheckListsIQsVariables: the variables iq reads are known to the
// SDK's unknown-variable check.
func TestEnvcheckListsIQsVariables(t *testing.T) {
	var ours []string
	for _, v := range slices.Concat(clientVars, clusterVars) {
		if v.Doc != "" { // AZKAFKA_MAX_RESPONSE_BYTES is the SDK's
			ours = append(ours, v.Name)
		}
	}
	if !slices.Equal(ours, envcheck.IQ) {
		t.Errorf("iq reads %v, envcheck.IQ lists %v", ours, envcheck.IQ)
	}
}

func TestAllowStandbyIsStrict(t *testing.T) {
	snap, _ := newSnapshot(threeHosts())
	for v, ok := range map[string]bool{"TRUE": true, "false": true, "1": false, "t": false, "yes": false} {
		_, err := NewClient(sourceOf(snap), WithAZ("az1"), WithLookupEnv(func(k string) (string, bool) {
			if k == envAllowStandby {
				return v, true
			}
			return "", false
		}))
		if refused := err != nil && strings.Contains(err.Error(), "want true or false (any case)"); refused == ok {
			t.Errorf("%s=%q: err = %v", envAllowStandby, v, err)
		}
	}
}
