// Package migrate moves Go packages from kafka-go's clients to the SDK's:
// the engine of `azkafka migrate`. It loads the packages type-checked
// (golang.org/x/tools/go/packages), rewrites what it can prove safe, and
// reports, with its position and the reason, every site it leaves as it
// is.
//
// What it rewrites, in the packages given (the others are "outside"):
//   - kafka.NewReader(cfg) becomes sdk.MustNewReader(cfg), and
//     &kafka.Writer{...} becomes sdk.MustNewWriter(&kafka.Writer{...}):
//     the same shapes, no error path to add;
//   - *kafka.Writer and *kafka.Reader in types (signatures, fields,
//     variables, interfaces, composite types) become *sdk.Writer and
//     *sdk.Reader; kafka.WriterStats and kafka.ReaderStats become the
//     SDK's, which embed them;
//   - with Dialers, &kafka.Dialer{...} and &kafka.Transport{...} become
//     sdk.MustNewAZAwareDialer(...) and sdk.MustNewTransport(...) (their
//     types stay kafka-go's: those clients keep kafka-go's engine);
//   - the sdk import is added, kafka-go's removed when no longer used.
//
// What it refuses, leaving the whole package as it is (and every package
// of the given ones that shares Writer or Reader values with it): a
// *kafka.Writer or *kafka.Reader passed to a function outside the given
// packages that takes one, or to package reflect; put in a struct of an
// outside package; a field read from one (sdk's types have no fields);
// an embedded Writer or Reader; a Writer or Reader held by value. A
// package that refuses is reported once per site.
package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/token"
	"go/types"
	"os"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/ast/astutil"
	"golang.org/x/tools/go/packages"
)

// Import paths the rewrite knows.
const (
	kafkaPath = "github.com/segmentio/kafka-go"
	sdkPath   = "github.com/azkafka/azkafka/sdk"
)

// Config is one run.
type Config struct {
	// Dir is the directory the patterns are relative to (the module's).
	Dir string
	// Patterns are the packages to migrate, as `go build` takes them.
	Patterns []string
	// Dialers also rewrites kafka.Dialer and kafka.Transport literals.
	Dialers bool
	// Overlay replaces the contents of files by path (tests).
	Overlay map[string][]byte
	// Env is the go command's environment; nil: os.Environ().
	Env []string
}

// Site is a place left as it is, and why.
type Site struct {
	Pos    token.Position
	Reason string
}

func (s Site) String() string { return fmt.Sprintf("%s: left unchanged: %s", s.Pos, s.Reason) }

// Result is what a run would change.
type Result struct {
	// Files maps each file the run changes to its new contents.
	Files map[string][]byte
	// Old maps the same files to their contents before.
	Old map[string][]byte
	// Refused lists the sites left unchanged, in file order.
	Refused []Site
	// Rewrites counts the sites rewritten.
	Rewrites int
}

// Run loads cfg's packages and computes the migration; it writes nothing.
func Run(cfg Config) (*Result, error) {
	fset := token.NewFileSet()
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	pcfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedSyntax |
			packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports,
		Dir: cfg.Dir, Tests: true, Fset: fset, Overlay: cfg.Overlay, Env: env,
	}
	pkgs, err := packages.Load(pcfg, cfg.Patterns...)
	if err != nil {
		return nil, fmt.Errorf("migrate: loading %s: %w", strings.Join(cfg.Patterns, " "), err)
	}
	var errs []error
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s", e))
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("migrate: the packages do not build; fix them first:\n%w", errors.Join(errs...))
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("migrate: no package matches %s", strings.Join(cfg.Patterns, " "))
	}
	m := &migration{cfg: cfg, fset: fset, given: map[string]bool{}, units: map[string]*unit{}}
	for _, p := range pkgs {
		if !strings.HasSuffix(p.PkgPath, ".test") {
			m.given[basePath(p)] = true
		}
	}
	for _, p := range pkgs {
		if !strings.HasSuffix(p.PkgPath, ".test") { // a test binary's generated main
			m.add(p)
		}
	}
	m.check()
	m.pin()
	return m.rewrite()
}

// basePath is the import path of the package p belongs to: x's external
// test package x_test is x's.
func basePath(p *packages.Package) string { return strings.TrimSuffix(p.PkgPath, "_test") }

// migration is one run's state.
type migration struct {
	cfg   Config
	fset  *token.FileSet
	given map[string]bool // import paths of the given packages
	units map[string]*unit
	order []string
}

// unit is one given package with its test files and external test
// package: what is rewritten, or left, as one.
type unit struct {
	path    string
	files   map[string]*file // by file name
	imports map[string]bool  // given packages it imports
	refused []Site
	// pinnedBy names the unit whose refusal leaves this one unchanged.
	pinnedBy string
	// mentions: the unit uses kafka-go's Writer or Reader types.
	mentions bool
}

type file struct {
	name string
	ast  *ast.File
	info *types.Info
	pkg  *types.Package
}

// add records p's files under its unit, once each (a test variant holds
// the package's files too; its type information is the same).
func (m *migration) add(p *packages.Package) {
	path := basePath(p)
	u := m.units[path]
	if u == nil {
		u = &unit{path: path, files: map[string]*file{}, imports: map[string]bool{}}
		m.units[path] = u
		m.order = append(m.order, path)
	}
	for i, f := range p.Syntax {
		name := p.CompiledGoFiles[i]
		if !strings.HasSuffix(name, ".go") || u.files[name] != nil {
			continue
		}
		u.files[name] = &file{name: name, ast: f, info: p.TypesInfo, pkg: p.Types}
	}
	for imp := range p.Imports {
		if m.given[imp] && imp != path {
			u.imports[imp] = true
		}
	}
}

// kafkaType reports whether t is kafka-go's Writer or Reader, or a pointer
// to one, and which.
func kafkaType(t types.Type) (name string, pointer bool) {
	if p, ok := t.(*types.Pointer); ok {
		t, pointer = p.Elem(), true
	}
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != kafkaPath {
		return "", false
	}
	switch n.Obj().Name() {
	case "Writer", "Reader":
		return n.Obj().Name(), pointer
	}
	return "", false
}

// kafkaTypeName returns the kafka-go type name id refers to, "" for
// another.
func kafkaTypeName(info *types.Info, e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	obj, ok := info.Uses[sel.Sel].(*types.TypeName)
	if !ok || obj.Pkg() == nil || obj.Pkg().Path() != kafkaPath {
		return ""
	}
	return obj.Name()
}

// check finds, in every unit, the sites that keep it unchanged.
func (m *migration) check() {
	for _, path := range m.order {
		u := m.units[path]
		for _, name := range sortedNames(u.files) {
			f := u.files[name]
			astutil.Apply(f.ast, func(c *astutil.Cursor) bool {
				m.checkNode(u, f, c.Node())
				m.checkLiteral(u, f, c)
				return true
			}, nil)
		}
	}
}

func (m *migration) refuse(u *unit, pos token.Pos, format string, args ...any) {
	u.refused = append(u.refused, Site{Pos: m.fset.Position(pos), Reason: fmt.Sprintf(format, args...)})
}

// checkNode records a refusal for n when it is one of the unsafe sites.
func (m *migration) checkNode(u *unit, f *file, n ast.Node) {
	info := f.info
	switch n := n.(type) {
	case *ast.SelectorExpr:
		if name := kafkaTypeName(info, n); name == "Writer" || name == "Reader" {
			u.mentions = true
		}
		if sel := info.Selections[n]; sel != nil && sel.Kind() == types.FieldVal {
			if name, _ := kafkaType(info.TypeOf(n.X)); name != "" {
				m.refuse(u, n.Sel.Pos(), "reads field %s of a kafka.%s; sdk.%s has no fields", n.Sel.Name, name, name)
			}
		}
	case *ast.StructType:
		for _, fld := range n.Fields.List {
			if len(fld.Names) == 0 {
				if name, _ := kafkaType(info.TypeOf(fld.Type)); name != "" {
					m.refuse(u, fld.Pos(), "embeds kafka.%s: its fields and methods are promoted into the struct", name)
				}
			}
		}
	case *ast.CallExpr:
		m.checkCall(u, f, n)
	case *ast.CompositeLit:
		m.checkOutsideLiteral(u, f, n)
	case *ast.ValueSpec, *ast.TypeSpec:
		m.checkByValue(u, f, n)
	}
}

// checkLiteral refuses a kafka.Writer literal not taken by address (a
// Writer used by value) and a kafka.Reader literal (kafka-go's Readers
// come from NewReader), and new(kafka.Writer).
func (m *migration) checkLiteral(u *unit, f *file, c *astutil.Cursor) {
	switch n := c.Node().(type) {
	case *ast.CompositeLit:
		name := kafkaTypeName(f.info, n.Type)
		if name != "Writer" && name != "Reader" {
			return
		}
		if p, ok := c.Parent().(*ast.UnaryExpr); ok && p.Op == token.AND && name == "Writer" {
			return
		}
		m.refuse(u, n.Pos(), "a kafka.%s literal used by value; sdk.%s comes from its constructor", name, name)
	case *ast.CallExpr:
		id, ok := ast.Unparen(n.Fun).(*ast.Ident)
		if !ok || len(n.Args) != 1 {
			return
		}
		if b, ok := f.info.Uses[id].(*types.Builtin); ok && b.Name() == "new" {
			if name := kafkaTypeName(f.info, n.Args[0]); name == "Writer" || name == "Reader" {
				m.refuse(u, n.Pos(), "new(kafka.%s): write &kafka.%s{...} with its configuration", name, name)
			}
		}
	}
}

// checkCall refuses a Writer or Reader passed to a function outside the
// given packages whose parameter takes it, or to package reflect.
func (m *migration) checkCall(u *unit, f *file, call *ast.CallExpr) {
	info := f.info
	fn := calleeFunc(info, call)
	if fn == nil || fn.Pkg() == nil {
		return
	}
	pkg := fn.Pkg().Path()
	if m.given[pkg] || pkg == kafkaPath || pkg == sdkPath {
		return
	}
	sig, ok := fn.Type().(*types.Signature)
	if !ok {
		return
	}
	for i, arg := range call.Args {
		name, _ := kafkaType(info.TypeOf(arg))
		if name == "" {
			continue
		}
		if pkg == "reflect" {
			m.refuse(u, arg.Pos(), "a kafka.%s goes to reflect.%s, which would see sdk.%s's unexported fields", name, fn.Name(), name)
			continue
		}
		if p := paramType(sig, i); p != nil {
			if pn, _ := kafkaType(p); pn != "" {
				m.refuse(u, arg.Pos(), "a *kafka.%s goes to %s.%s, outside the packages migrated, which takes a *kafka.%s", name, fn.Pkg().Name(), fn.Name(), pn)
			}
		}
	}
}

// calleeFunc is the function call calls, nil for a conversion, a builtin
// or a function value.
func calleeFunc(info *types.Info, call *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fun
	case *ast.SelectorExpr:
		id = fun.Sel
	case *ast.IndexExpr:
		if s, ok := fun.X.(*ast.SelectorExpr); ok {
			id = s.Sel
		}
	}
	if id == nil {
		return nil
	}
	fn, _ := info.Uses[id].(*types.Func)
	return fn
}

// paramType is the type of the parameter argument i fills.
func paramType(sig *types.Signature, i int) types.Type {
	ps := sig.Params()
	switch {
	case i < ps.Len()-1 || i < ps.Len() && !sig.Variadic():
		return ps.At(i).Type()
	case sig.Variadic() && ps.Len() > 0:
		if s, ok := ps.At(ps.Len() - 1).Type().(*types.Slice); ok {
			return s.Elem()
		}
	}
	return nil
}

// checkOutsideLiteral refuses a Writer or Reader put in a struct of an
// outside package.
func (m *migration) checkOutsideLiteral(u *unit, f *file, lit *ast.CompositeLit) {
	t := f.info.TypeOf(lit)
	if t == nil {
		return
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || m.given[n.Obj().Pkg().Path()] || n.Obj().Pkg().Path() == kafkaPath {
		return
	}
	for _, el := range lit.Elts {
		v := el
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			v = kv.Value
		}
		if name, _ := kafkaType(f.info.TypeOf(v)); name != "" {
			m.refuse(u, v.Pos(), "a *kafka.%s goes into a %s.%s, outside the packages migrated", name, n.Obj().Pkg().Name(), n.Obj().Name())
		}
	}
}

// checkByValue refuses a variable, field or type that holds a Writer or
// Reader by value.
func (m *migration) checkByValue(u *unit, f *file, n ast.Node) {
	var typ ast.Expr
	switch n := n.(type) {
	case *ast.ValueSpec:
		typ = n.Type
	case *ast.TypeSpec:
		typ = n.Type
	}
	if typ == nil {
		return
	}
	if name := kafkaTypeName(f.info, typ); name == "Writer" || name == "Reader" {
		m.refuse(u, typ.Pos(), "holds a kafka.%s by value; sdk.%s is used through a pointer", name, name)
	}
}

// pin leaves unchanged every unit that refused, and, until nothing
// changes, every unit sharing Writer or Reader values with one (it
// imports it or is imported by it, and uses those types).
func (m *migration) pin() {
	for _, u := range m.units {
		if len(u.refused) > 0 {
			u.pinnedBy = u.path
		}
	}
	for changed := true; changed; {
		changed = false
		for _, path := range m.order {
			u := m.units[path]
			if u.pinnedBy != "" || !u.mentions {
				continue
			}
			for _, other := range m.order {
				o := m.units[other]
				if o.pinnedBy == "" || !o.mentions || !(u.imports[other] || o.imports[path]) {
					continue
				}
				u.pinnedBy, changed = other, true
				break
			}
		}
	}
}

// rewrite rewrites the files of the units not pinned.
func (m *migration) rewrite() (*Result, error) {
	res := &Result{Files: map[string][]byte{}, Old: map[string][]byte{}}
	for _, path := range m.order {
		u := m.units[path]
		res.Refused = append(res.Refused, u.refused...)
		if u.pinnedBy != "" {
			if u.pinnedBy != u.path && u.mentions {
				res.Refused = append(res.Refused, Site{Pos: token.Position{Filename: sortedNames(u.files)[0], Line: 1, Column: 1},
					Reason: "package " + path + " shares kafka-go Writer or Reader values with " + u.pinnedBy + ", which is left unchanged"})
			}
			continue
		}
		for _, name := range sortedNames(u.files) {
			f := u.files[name]
			old, err := m.source(name)
			if err != nil {
				return nil, err
			}
			n := m.rewriteFile(f)
			if n == 0 {
				continue
			}
			var buf bytes.Buffer
			if err := format.Node(&buf, m.fset, f.ast); err != nil {
				return nil, fmt.Errorf("migrate: formatting %s: %w", name, err)
			}
			if !bytes.Equal(buf.Bytes(), old) {
				res.Files[name], res.Old[name] = buf.Bytes(), old
				res.Rewrites += n
			}
		}
	}
	sort.SliceStable(res.Refused, func(i, j int) bool {
		a, b := res.Refused[i].Pos, res.Refused[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Offset < b.Offset
	})
	return res, nil
}

func (m *migration) source(name string) ([]byte, error) {
	if b, ok := m.cfg.Overlay[name]; ok {
		return b, nil
	}
	return os.ReadFile(name)
}

// rewriteFile rewrites f's syntax tree in place and returns how many
// sites it changed.
func (m *migration) rewriteFile(f *file) int {
	sdkName := sdkImportName(f)
	info := f.info
	n := 0
	sdkSel := func(name string) *ast.SelectorExpr {
		return &ast.SelectorExpr{X: ast.NewIdent(sdkName), Sel: ast.NewIdent(name)}
	}
	// wrapped: composite literals already given to a function of sdk.
	wrapped := map[ast.Expr]bool{}
	ast.Inspect(f.ast, func(node ast.Node) bool {
		if call, ok := node.(*ast.CallExpr); ok {
			if fn := calleeFunc(info, call); fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == sdkPath {
				for _, a := range call.Args {
					wrapped[ast.Unparen(a)] = true
				}
			}
		}
		return true
	})
	astutil.Apply(f.ast, func(c *astutil.Cursor) bool {
		switch node := c.Node().(type) {
		case *ast.StarExpr:
			if name := kafkaTypeName(info, node.X); name == "Writer" || name == "Reader" {
				c.Replace(&ast.StarExpr{Star: node.Star, X: sdkSel(name)})
				n++
				return false
			}
		case *ast.SelectorExpr:
			if name := kafkaTypeName(info, node); name == "WriterStats" || name == "ReaderStats" {
				if _, lit := c.Parent().(*ast.CompositeLit); !lit {
					c.Replace(sdkSel(name))
					n++
				}
				return false
			}
		case *ast.CallExpr:
			if fn := calleeFunc(info, node); fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == kafkaPath && fn.Name() == "NewReader" {
				node.Fun = sdkSel("MustNewReader")
				n++
			}
		case *ast.UnaryExpr:
			if node.Op != token.AND || wrapped[node] {
				break
			}
			lit, ok := node.X.(*ast.CompositeLit)
			if !ok {
				break
			}
			ctor := ""
			switch kafkaTypeName(info, lit.Type) {
			case "Writer":
				ctor = "MustNewWriter"
			case "Dialer":
				if m.cfg.Dialers {
					ctor = "MustNewAZAwareDialer"
				}
			case "Transport":
				if m.cfg.Dialers {
					ctor = "MustNewTransport"
				}
			}
			if ctor != "" {
				c.Replace(&ast.CallExpr{Fun: sdkSel(ctor), Args: []ast.Expr{node}})
				n++
				return false
			}
		}
		return true
	}, nil)
	if n == 0 {
		return 0
	}
	if sdkName == "sdk" {
		astutil.AddImport(m.fset, f.ast, sdkPath)
	} else {
		astutil.AddNamedImport(m.fset, f.ast, sdkName, sdkPath)
	}
	if !m.usesKafka(f) {
		name := ""
		for _, imp := range f.ast.Imports {
			if strings.Trim(imp.Path.Value, `"`) == kafkaPath && imp.Name != nil {
				name = imp.Name.Name
			}
		}
		astutil.DeleteNamedImport(m.fset, f.ast, name, kafkaPath)
	}
	return n
}

// sdkImportName is the name the file gives package sdk: its own import's,
// else "sdk", else "azsdk" when "sdk" names something else there.
func sdkImportName(f *file) string {
	for _, imp := range f.ast.Imports {
		if strings.Trim(imp.Path.Value, `"`) == sdkPath {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return "sdk"
		}
	}
	taken := f.pkg.Scope().Lookup("sdk") != nil
	for _, imp := range f.ast.Imports {
		if imp.Name != nil && imp.Name.Name == "sdk" || strings.HasSuffix(strings.Trim(imp.Path.Value, `"`), "/sdk") {
			taken = true
		}
	}
	if taken {
		return "azsdk"
	}
	return "sdk"
}

// usesKafka reports whether f, rewritten, still refers to kafka-go's
// package (the identifiers left from before the rewrite carry their type
// information).
func (m *migration) usesKafka(f *file) bool {
	used := false
	ast.Inspect(f.ast, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if pn, ok := f.info.Uses[id].(*types.PkgName); ok && pn.Imported().Path() == kafkaPath {
				used = true
			}
		}
		return !used
	})
	return used
}

func sortedNames(m map[string]*file) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
