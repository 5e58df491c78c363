// Package settingstest checks a package's table of variables against the
// README and the option docs, for the package's own tests.
package settingstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/azkafka/azkafka/internal/settings"
)

// CheckREADME checks that the README at path holds rows, one after the
// other, starting at the row of the first one's variable; with update it
// rewrites them instead. cmd names the command that updates them, for the
// failure message.
func CheckREADME(t testing.TB, path string, rows []string, update bool, cmd string) {
	t.Helper()
	if len(rows) == 0 {
		t.Fatal("no rows")
	}
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start := rows[0][:strings.Index(rows[0][2:], " |")+4] // "| `NAME` |"
	lines := strings.Split(string(readme), "\n")
	first := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, start) })
	if first < 0 {
		t.Fatalf("%s has no row starting %q", path, start)
	}
	end := min(first+len(rows), len(lines))
	got := lines[first:end]
	if slices.Equal(got, rows) {
		return
	}
	if update {
		out := slices.Concat(lines[:first], rows, lines[end:])
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for i := range rows {
		g := ""
		if i < len(got) {
			g = got[i]
		}
		if g != rows[i] {
			t.Errorf("%s line %d:\n got %s\nwant %s", path, first+i+1, g, rows[i])
		}
	}
	t.Logf("run %s to rewrite them", cmd)
}

// CheckOptionDocs checks that the doc of each variable's Option names the
// variable (in full, or without its AZKAFKA_ prefix). Option is a function
// of files ("WithMaxLag") or a field of a struct type of files
// ("Config.Timeout").
func CheckOptionDocs[C any](t testing.TB, files []string, table []settings.Var[C]) {
	t.Helper()
	fset := token.NewFileSet()
	docs := map[string]string{}
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Doc != nil && d.Recv == nil {
					docs[d.Name.Name] = d.Doc.Text()
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, f := range st.Fields.List {
						if f.Doc == nil {
							continue
						}
						for _, n := range f.Names {
							docs[ts.Name.Name+"."+n.Name] = f.Doc.Text()
						}
					}
				}
			}
		}
	}
	for _, v := range table {
		if v.Option == "" {
			continue
		}
		doc, ok := docs[v.Option]
		switch {
		case !ok:
			t.Errorf("%s: its option %s is not documented in %v", v.Name, v.Option, files)
		case !strings.Contains(doc, v.Name) && !strings.Contains(doc, strings.TrimPrefix(v.Name, "AZKAFKA_")):
			t.Errorf("the doc of %s does not name %s", v.Option, v.Name)
		}
	}
}

// Defaults returns the variables of table whose default is a value
// (settings.Code), with that value: setting each to it must change
// nothing, which each package's TestEnvDefaultsAreTheDefaults checks.
func Defaults[C any](table []settings.Var[C]) map[string]string {
	out := map[string]string{}
	for _, v := range table {
		if strings.HasPrefix(v.Default, "`") {
			out[v.Name] = strings.Trim(v.Default, "`")
		}
	}
	return out
}
