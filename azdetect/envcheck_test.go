package azdetect

import (
	"slices"
	"strings"
	"testing"

	"github.com/azkafka/azkafka/internal/envcheck"
)

// TestEnvcheckListsAzdetectsVariables: every AZKAFKA_* variable azdetect
// reads is known, so that azkafka does not call it misspelled.
func TestEnvcheckListsAzdetectsVariables(t *testing.T) {
	var ours []string
	for _, v := range []string{EnvAZ, EnvAZFormat, EnvDetectProviders, EnvDetectTimeout, EnvECSMetadataURI, EnvEC2Endpoint,
		EnvEC2EndpointMode, EnvEC2Disabled, EnvGCEMetadataHost, EnvAzureEndpoint, EnvKubernetesHost, EnvKubernetesPort,
		EnvNodeName, EnvKubernetesToken, EnvKubernetesCA} {
		if strings.HasPrefix(v, envcheck.Prefix) {
			ours = append(ours, v)
		}
	}
	slices.Sort(ours)
	listed := slices.Sorted(slices.Values(envcheck.Azdetect))
	if !slices.Equal(ours, listed) {
		t.Errorf("azdetect reads %v, envcheck.Azdetect lists %v", ours, listed)
	}
}

func TestAZFormatIsCaseInsensitive(t *testing.T) {
	cfg, err := ConfigFromEnv(func(k string) string {
		if k == EnvAZFormat {
			return "ID"
		}
		return ""
	})
	if err != nil || cfg.Format != FormatID {
		t.Errorf("AZKAFKA_AZ_FORMAT=ID: %+v, %v", cfg.Format, err)
	}
}
