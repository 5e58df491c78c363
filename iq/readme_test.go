package iq

import (
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/azkafka/azkafka/internal/frameguard"
	"github.com/azkafka/azkafka/internal/settings"
	"github.com/azkafka/azkafka/internal/settings/settingstest"
)

// metadataHandler is the Java handler users copy into their Kafka Streams
// application: the conformance suite's own, run against Kafka Streams.
const metadataHandler = "conformance/java/streams/src/main/java/azkafka/conformance/IqMetadataHandler.java"

// TestREADMENamesTheMetadataHandler: the README and the package doc name
// the handler by its path, the file is there, and it writes every field of
// the document this package reads, so the file named is the one that
// serves document.
func TestREADMENamesTheMetadataHandler(t *testing.T) {
	for _, doc := range []string{"../README.md", "doc.go"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		// The package doc may wrap the path onto a line of its own.
		if !strings.Contains(strings.ReplaceAll(string(b), "\n// ", ""), metadataHandler) {
			t.Errorf("%s does not name %s", doc, metadataHandler)
		}
	}
	java, err := os.ReadFile("../" + metadataHandler)
	if err != nil {
		t.Fatalf("the handler the docs name: %v", err)
	}
	if !strings.Contains(string(java), "public final class IqMetadataHandler implements HttpHandler") {
		t.Errorf("%s does not declare the handler class", metadataHandler)
	}
	fields := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct {
			return
		}
		for i := range ty.NumField() {
			f := ty.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				fields[name] = true
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[document]())
	if len(fields) < 15 {
		t.Fatalf("found %d JSON fields in document: %v", len(fields), fields)
	}
	for name := range fields {
		// The handler writes each name as a Java string literal, \"name\".
		if !strings.Contains(string(java), `\"`+name+`\"`) {
			t.Errorf("%s never writes the document field %q", metadataHandler, name)
		}
	}
}

var updateREADME = flag.Bool("update", false, "rewrite the README's rows of iq's variables from clientVars and clusterVars")

// TestREADMEConfigTable: the README's rows of iq's variables are generated
// from clientVars and clusterVars (variable, default from the default
// constant, description), in their order; `go test ./iq -run
// TestREADMEConfigTable -update` rewrites them.
func TestREADMEConfigTable(t *testing.T) {
	rows := slices.Concat(settings.Rows(clientVars), settings.Rows(clusterVars))
	settingstest.CheckREADME(t, "../README.md", rows, *updateREADME, "go test ./iq -run TestREADMEConfigTable -update")
}

// TestOptionsNameTheirVariables: the doc of each variable's option names
// the variable.
func TestOptionsNameTheirVariables(t *testing.T) {
	settingstest.CheckOptionDocs(t, []string{"client.go", "clustersource.go"}, clientVars)
	settingstest.CheckOptionDocs(t, []string{"client.go", "clustersource.go"}, clusterVars)
}

// TestEnvDefaultsAreTheDefaults: setting each variable to the default its
// row states changes nothing.
func TestEnvDefaultsAreTheDefaults(t *testing.T) {
	defaults := settingstest.Defaults(slices.Concat(clientVars, clusterReads))
	if len(defaults) != 4 {
		t.Fatalf("%d variables have a literal default: %v", len(defaults), defaults)
	}
	snap, err := newSnapshot(threeHosts())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewClient(sourceOf(snap), WithLookupEnv(envMap(nil)))
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := NewClient(sourceOf(snap), WithLookupEnv(envMap(defaults)))
	if err != nil {
		t.Fatal(err)
	}
	if plain.allowStandby != explicit.allowStandby || plain.maxLag != explicit.maxLag {
		t.Errorf("defaults: standby %v, max lag %d; with the documented defaults set: %v, %d",
			plain.allowStandby, plain.maxLag, explicit.allowStandby, explicit.maxLag)
	}
	src, err := NewClusterSource([]string{"127.0.0.1:9092"}, "app", WithLookupEnv(envMap(defaults)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if cs := clusterOf(src); cs.azTag != defaultAZTag || cs.maxResponse != frameguard.DefaultMaxResponseBytes {
		t.Errorf("with the documented defaults set: tag %q, limit %d", cs.azTag, cs.maxResponse)
	}
}
