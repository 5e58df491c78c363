package iq

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// metadataHandler is the Java handler users copy into their Kafka Streams
// application: the conformance suite's own, run against Kafka Streams.
const metadataHandler = "conformance/java/streams/src/main/java/azkafka/conformance/IqMetadataHandler.java"

// TestREADMENamesTheMetadataHandler: the README and the package doc name
// the handler by its path, the file is there, and it writes every field of
// the document this package reads, so the file named is the one that
// serves Document.
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
	walk(reflect.TypeFor[Document]())
	if len(fields) < 15 {
		t.Fatalf("found %d JSON fields in Document: %v", len(fields), fields)
	}
	for name := range fields {
		// The handler writes each name as a Java string literal, \"name\".
		if !strings.Contains(string(java), `\"`+name+`\"`) {
			t.Errorf("%s never writes the document field %q", metadataHandler, name)
		}
	}
}

// TestREADMEListsIQVariables: the README's configuration table has a row
// per variable of this package, in the shape of the SDK's rows (name,
// default, meaning), with the defaults the code applies; setting each to
// the default its row states changes nothing.
func TestREADMEListsIQVariables(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{
		EnvAllowStandby: "false",
		EnvMaxLag:       strconv.Itoa(DefaultMaxLag),
		EnvAZTag:        DefaultAZTag,
	}
	for name, def := range defaults {
		if row := "| `" + name + "` | `" + def + "` |"; !strings.Contains(string(readme), row) {
			t.Errorf("README lacks the row start %q", row)
		}
	}

	snap, err := NewSnapshot(threeHosts())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewClient(snap, WithLookupEnv(envMap(nil)))
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := NewClient(snap, WithLookupEnv(envMap(defaults)))
	if err != nil {
		t.Fatal(err)
	}
	if plain.AllowStandby() != explicit.AllowStandby() || plain.MaxLag() != explicit.MaxLag() {
		t.Errorf("defaults: standby %v, max lag %d; with the documented defaults set: %v, %d",
			plain.AllowStandby(), plain.MaxLag(), explicit.AllowStandby(), explicit.MaxLag())
	}
	t.Setenv(EnvAZTag, defaults[EnvAZTag])
	src, err := NewClusterSource([]string{"127.0.0.1:9092"}, "app")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.azTag != DefaultAZTag {
		t.Errorf("%s=%s: tag %q, want the default %q", EnvAZTag, defaults[EnvAZTag], src.azTag, DefaultAZTag)
	}
}
