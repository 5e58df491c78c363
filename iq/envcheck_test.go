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
	ours := []string{EnvAllowStandby, EnvMaxLag, EnvAZTag}
	if !slices.Equal(ours, envcheck.IQ) {
		t.Errorf("iq reads %v, envcheck.IQ lists %v", ours, envcheck.IQ)
	}
}

func TestAllowStandbyIsStrict(t *testing.T) {
	snap, _ := NewSnapshot(threeHosts())
	for v, ok := range map[string]bool{"TRUE": true, "false": true, "1": false, "t": false, "yes": false} {
		_, err := NewClient(snap, WithAZ("az1"), WithLookupEnv(func(k string) (string, bool) {
			if k == EnvAllowStandby {
				return v, true
			}
			return "", false
		}))
		if refused := err != nil && strings.Contains(err.Error(), "not a boolean"); refused == ok {
			t.Errorf("%s=%q: err = %v", EnvAllowStandby, v, err)
		}
	}
}
