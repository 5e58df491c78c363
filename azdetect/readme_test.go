package azdetect

import (
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/azkafka/azkafka/internal/settings"
	"github.com/azkafka/azkafka/internal/settings/settingstest"
)

var updateREADME = flag.Bool("update", false, "rewrite the README's rows of azdetect's variables from envVars")

// TestREADMEConfigTable: the README's rows of azdetect's variables are
// generated from envVars (variable, default from the Default* constant,
// description), in its order; `go test ./azdetect -run
// TestREADMEConfigTable -update` rewrites them. The platforms' own
// variables are named in the README's prose.
func TestREADMEConfigTable(t *testing.T) {
	settingstest.CheckREADME(t, "../README.md", settings.Rows(envVars), *updateREADME, "go test ./azdetect -run TestREADMEConfigTable -update")
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range envVars {
		if v.Doc == "" && !strings.Contains(string(readme), "`"+v.Name+"`") {
			t.Errorf("README does not name %s", v.Name)
		}
	}
}

// TestConfigFieldsNameTheirVariables: the doc of the Config field each
// variable fills names the variable.
func TestConfigFieldsNameTheirVariables(t *testing.T) {
	settingstest.CheckOptionDocs(t, []string{"config.go"}, envVars)
}

// TestEnvDefaultsAreTheDefaults: setting each variable to the default its
// row states changes nothing, so the documented defaults are the real
// ones.
func TestEnvDefaultsAreTheDefaults(t *testing.T) {
	literal := settingstest.Defaults(envVars)
	if len(literal) < 5 {
		t.Fatalf("only %d variables have a literal default: %v", len(literal), literal)
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
