package azdetect

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestREADMEListsDetectionVariables: the README's configuration table has
// a row per AZKAFKA_* variable of this package (and the WarpStream one),
// in the shape of the SDK's rows (name, default, meaning), with the
// defaults the code applies; setting each to the default its row states
// changes nothing.
func TestREADMEListsDetectionVariables(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	literal := map[string]string{ // variables whose default is a value
		EnvAZFormat:        string(FormatName),
		EnvDetectTimeout:   DefaultTimeout.String(),
		EnvAzureEndpoint:   DefaultAzureEndpoint,
		EnvKubernetesToken: DefaultKubernetesTokenFile,
		EnvKubernetesCA:    DefaultKubernetesCAFile,
	}
	rows := map[string]string{ // the row starts
		EnvAZ:              "| `" + EnvAZ + "` | detected |",
		EnvWarpStreamAZ:    "| `" + EnvWarpStreamAZ + "` | unset |",
		EnvDetectProviders: "| `" + EnvDetectProviders + "` | all |",
	}
	for name, def := range literal {
		rows[name] = "| `" + name + "` | `" + def + "` |"
	}
	for _, row := range rows {
		if !strings.Contains(string(readme), row) {
			t.Errorf("README lacks the row start %q", row)
		}
	}
	// The cloud's own variables are named in the README too.
	for _, name := range []string{EnvECSMetadataURI, EnvEC2Endpoint, EnvEC2EndpointMode, EnvEC2Disabled,
		EnvGCEMetadataHost, EnvKubernetesHost, EnvKubernetesPort, EnvNodeName} {
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("README does not name %s", name)
		}
	}

	plain, err := ConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := ConfigFromEnv(func(k string) string { return literal[k] })
	if err != nil {
		t.Fatalf("the documented defaults: %v", err)
	}
	if a, b := plain.withDefaults(), explicit.withDefaults(); !reflect.DeepEqual(a, b) {
		t.Errorf("defaults %+v, with the documented defaults set %+v", a, b)
	}
}
