package azkafka_test

// The layout of the module, kept by a test: the runtime (the packages a
// user's program links) never imports the test rigs, and the runtime's
// internal leaves never import the packages above them.

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runtimeDirs are the packages a user's program links, and the leaves
// they share (internal/, but for internal/testkit).
var runtimeDirs = []string{"sdk", "iq", "azdetect", "retry", "metrics", "internal"}

// leafDir holds the runtime's internal packages: they import no package
// of the module outside internal/ (but for one another).
const leafDir = "internal"

// TestLayout checks every non-test Go file of the runtime: none imports a
// test rig (internal/testkit/...), and none in internal/ (outside the rigs)
// imports a package above it.
func TestLayout(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, root := range runtimeDirs {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (path == filepath.Join("internal", "testkit") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			checked++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				rel, ok := strings.CutPrefix(p, modulePath+"/")
				if !ok {
					continue
				}
				if strings.HasPrefix(rel, "internal/testkit") {
					t.Errorf("%s imports the test rig %s: runtime code must not", path, p)
				}
				if strings.HasPrefix(path, leafDir+string(filepath.Separator)) && !strings.HasPrefix(rel, "internal/") {
					t.Errorf("%s imports %s: the runtime's internal packages are leaves, imported by the packages above, never importing them", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d files: the walk found too little", checked)
	}
}
