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
	for _, v := range envVars {
		if strings.HasPrefix(v.Name, envcheck.Prefix) {
			ours = append(ours, v.Name)
		}
	}
	if !slices.Equal(ours, envcheck.Azdetect) {
		t.Errorf("azdetect reads %v, envcheck.Azdetect lists %v", ours, envcheck.Azdetect)
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

func TestProvidersAreCaseInsensitive(t *testing.T) {
	cfg, err := ConfigFromEnv(func(k string) string {
		if k == EnvDetectProviders {
			return "EC2, Kubernetes"
		}
		return ""
	})
	if err != nil || strings.Join(cfg.Providers, ",") != "ec2,kubernetes" {
		t.Errorf("AZKAFKA_DETECT_PROVIDERS=\"EC2, Kubernetes\": %v, %v", cfg.Providers, err)
	}
}
