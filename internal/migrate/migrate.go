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
//     SDK's, which embed them, and a kafka.WriterStats{...} literal
//     sdk.WriterStats{WriterStats: kafka.WriterStats{...}};
//   - with Dialers, &kafka.Dialer{...} and &kafka.Transport{...} become
//     sdk.MustNewAZAwareDialer(...) and sdk.MustNewTransport(...) (their
//     types stay kafka-go's: those clients keep kafka-go's engine);
//   - the sdk import is added (as azsdk, or azsdk2..., where a name in
//     scope at a rewritten site is sdk), kafka-go's removed when no
//     longer used.
//
// What it refuses, leaving the whole package as it is (and every package
// of the given ones that shares Writer or Reader values with it):
//   - a value whose type the rewrite changes on one side only: at every
//     argument, assignment, return, composite-literal element, send,
//     comparison, conversion and interface conversion, the types of both
//     sides are compared, as they will be after the rewrite, where one is
//     declared outside the given packages and holds kafka.Writer, Reader,
//     WriterStats or ReaderStats (a function of another module taking a
//     kafka.WriterStats, a []*kafka.Writer or a func(*kafka.Writer), its
//     variable assigned a Writer, its interface with a method returning
//     one, its function's *kafka.Writer result put in a rewritten
//     variable), and a Writer, Reader or their stats given as any to code
//     outside them (but fmt, log, log/slog and testing, which only format
//     it), which may assert kafka-go's type (flow.go);
//   - a Writer or Reader given to package reflect; a field read from one
//     (sdk's types have no fields); an embedded Writer or Reader; one held
//     by value (also as a type argument) or copied (*w);
//   - a &kafka.Writer{...} that sdk.MustNewWriter would panic on where
//     kafka-go's is valid until its first write: without Addr, or with a
//     Transport other than a *kafka.Transport;
//   - kafka.NewWriter(kafka.WriterConfig{...}): no &kafka.Writer{...} is
//     exactly the Writer it builds; kafka.NewReader and kafka.NewWriter
//     used as function values; kafka-go imported with a dot.
//
// A package that refuses is reported once per site. Last, the packages as
// rewritten are type-checked again; a package that would not build is
// left unchanged too, with the type checker's error (verify.go): the
// migration never writes code that does not build.
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
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/ast/astutil"
	"golang.org/x/tools/go/packages"
)

// Import paths the rewrite knows.
const (
	kafkaPath = "github.com/segmentio/kafka-go"
	sdkPath   = "github.com/azkafka/azkafka/sdk"
	// SDKModule is the module of package sdk, which a migrated module
	// requires.
	SDKModule = "github.com/azkafka/azkafka"
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
	// SDKVersion is the version of the SDK's module to type-check the
	// rewrite of a module that does not require it yet with (the
	// azkafka binary's); "" where the module requires or replaces it.
	SDKVersion string

	// noFlows turns the comparison of types at flows off (tests of the
	// verification that backs it).
	noFlows bool
}

// Site is a place left as it is, and why.
type Site struct {
	Pos    token.Position
	Reason string
}

func (s Site) String() string { return fmt.Sprintf("%s: left unchanged: %s", s.Pos, s.Reason) }

// Rel is s with its file name relative to dir when it is below it.
func (s Site) Rel(dir string) string {
	if r, err := filepath.Rel(dir, s.Pos.Filename); err == nil && !strings.HasPrefix(r, "..") {
		s.Pos.Filename = r
	}
	return s.String()
}

// Module is a module holding a rewritten file.
type Module struct {
	Path  string // its module path
	Dir   string // the directory of its go.mod
	GoMod string // its go.mod
}

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
	// Modules are the modules of the files changed, which then import
	// package sdk (see RequireSDK).
	Modules []Module
	// Unverified, when not "", says why the packages as rewritten could
	// not be type-checked (the checks before the rewrite still hold).
	Unverified string
}

// Run loads cfg's packages and computes the migration; it writes nothing.
// It then type-checks the packages as rewritten and, while one would not
// build, leaves it unchanged too and computes the migration again.
func Run(cfg Config) (*Result, error) {
	forced := map[string][]Site{}
	for {
		m, err := load(cfg)
		if err != nil {
			return nil, err
		}
		m.check()
		for path, sites := range forced {
			if u := m.units[path]; u != nil {
				u.refused = append(u.refused, sites...)
			}
		}
		m.pin()
		res, err := m.rewrite()
		if err != nil || len(res.Files) == 0 {
			return res, err
		}
		bad, err := m.verify(res)
		if err != nil {
			return nil, err
		}
		if len(bad) == 0 {
			return res, nil
		}
		progress := false
		for path, sites := range bad {
			if u := m.units[path]; u != nil && u.pinnedBy == "" {
				progress = true
			}
			forced[path] = append(forced[path], sites...)
		}
		if !progress {
			var all []Site
			for _, s := range bad {
				all = append(all, s...)
			}
			return nil, fmt.Errorf("migrate: the rewritten packages do not build: %v", all)
		}
	}
}

// loadMode is what both loads need: syntax and types of the packages
// given, their imports, and their modules.
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedSyntax |
	packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports | packages.NeedModule

// load loads cfg's packages, which must build, into a migration.
func load(cfg Config) (*migration, error) {
	fset := token.NewFileSet()
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	pcfg := &packages.Config{Mode: loadMode, Dir: cfg.Dir, Tests: true, Fset: fset, Overlay: cfg.Overlay, Env: env}
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
	m := &migration{cfg: cfg, env: env, fset: fset, given: map[string]bool{}, units: map[string]*unit{}, inits: map[token.Pos]initExpr{}}
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
	return m, nil
}

// basePath is the import path of the package p belongs to: x's external
// test package x_test is x's.
func basePath(p *packages.Package) string { return strings.TrimSuffix(p.PkgPath, "_test") }

// migration is one run's state.
type migration struct {
	cfg   Config
	env   []string
	fset  *token.FileSet
	given map[string]bool // import paths of the given packages
	units map[string]*unit
	order []string
	// inits are the expressions the variables declared without a type
	// take theirs from, by the variable's position (flow.go).
	inits map[token.Pos]initExpr
}

// unit is one given package with its test files and external test
// package: what is rewritten, or left, as one.
type unit struct {
	path    string
	files   map[string]*file // by file name
	imports map[string]bool  // given packages it imports
	module  *packages.Module
	refused []Site
	// pinnedBy names the unit whose refusal leaves this one unchanged.
	pinnedBy string
	// mentions: the unit uses kafka-go's Writer, Reader or Stats types or
	// kafka.NewReader.
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
		u = &unit{path: path, files: map[string]*file{}, imports: map[string]bool{}, module: p.Module}
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

// statsType is "WriterStats" or "ReaderStats" when t is kafka-go's, else
// "".
func statsType(t types.Type) string {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != kafkaPath {
		return ""
	}
	switch n.Obj().Name() {
	case "WriterStats", "ReaderStats":
		return n.Obj().Name()
	}
	return ""
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

// kafkaFunc returns the name of the kafka-go function id refers to, ""
// for another.
func kafkaFunc(info *types.Info, id *ast.Ident) string {
	fn, ok := info.Uses[id].(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != kafkaPath || fn.Type().(*types.Signature).Recv() != nil {
		return ""
	}
	return fn.Name()
}

// check finds, in every unit, the sites that keep it unchanged.
func (m *migration) check() {
	for _, path := range m.order {
		for _, f := range m.units[path].files {
			m.collectInits(f)
		}
	}
	for _, path := range m.order {
		u := m.units[path]
		for _, name := range sortedNames(u.files) {
			f := u.files[name]
			m.checkImports(u, f)
			w := &walker{m: m, u: u, f: f, elided: map[*ast.CompositeLit]bool{}}
			astutil.Apply(f.ast, w.pre, w.post)
		}
	}
}

func (m *migration) refuse(u *unit, pos token.Pos, format string, args ...any) {
	u.refused = append(u.refused, Site{Pos: m.fset.Position(pos), Reason: fmt.Sprintf(format, args...)})
}

// checkImports refuses kafka-go imported with a dot: the rewrite knows
// its names qualified only.
func (m *migration) checkImports(u *unit, f *file) {
	for _, imp := range f.ast.Imports {
		if imp.Name != nil && imp.Name.Name == "." && importPath(imp) == kafkaPath {
			m.refuse(u, imp.Pos(), "imports kafka-go with a dot; the migration rewrites its qualified names only (kafka.Writer)")
		}
	}
}

func importPath(imp *ast.ImportSpec) string {
	p, _ := strconv.Unquote(imp.Path.Value)
	return p
}

// walker walks one file for check.
type walker struct {
	m *migration
	u *unit
	f *file
	// sigs are the signatures of the functions around the node.
	sigs []*types.Signature
	// elided are the composite literals with their type elided whose
	// element types are declared outside (flow.go).
	elided map[*ast.CompositeLit]bool
}

func (w *walker) pre(c *astutil.Cursor) bool {
	switch n := c.Node().(type) {
	case *ast.FuncDecl:
		sig, _ := w.f.info.Defs[n.Name].Type().(*types.Signature)
		w.sigs = append(w.sigs, sig)
	case *ast.FuncLit:
		sig, _ := w.f.info.TypeOf(n).(*types.Signature)
		w.sigs = append(w.sigs, sig)
	}
	w.m.checkNode(w.u, w.f, c)
	w.m.checkLiteral(w.u, w.f, c)
	if !w.m.cfg.noFlows {
		w.flow(c.Node())
	}
	return true
}

func (w *walker) post(c *astutil.Cursor) bool {
	switch c.Node().(type) {
	case *ast.FuncDecl, *ast.FuncLit:
		w.sigs = w.sigs[:len(w.sigs)-1]
	}
	return true
}

// newWriterReason is why kafka.NewWriter is not rewritten.
const newWriterReason = "its Writer is no &kafka.Writer{...} of the config's fields (it builds a Transport of its own from the Dialer, IdleConnTimeout and RebalanceInterval, and turns RequiredAcks 0 into RequireAll), so no rewrite is exact; write &kafka.Writer{...} and migrate again"

// checkNode records a refusal for the node at c when it is one of the
// unsafe sites.
func (m *migration) checkNode(u *unit, f *file, c *astutil.Cursor) {
	info := f.info
	switch n := c.Node().(type) {
	case *ast.SelectorExpr:
		switch name := kafkaTypeName(info, n); name {
		case "Writer", "Reader":
			u.mentions = true
			m.checkByValue(u, c, n, name)
		case "WriterStats", "ReaderStats":
			u.mentions = true
		}
		if sel := info.Selections[n]; sel != nil && sel.Kind() == types.FieldVal {
			if name, _ := kafkaType(info.TypeOf(n.X)); name != "" && !m.outside(f, n.X) {
				m.refuse(u, n.Sel.Pos(), "reads field %s of a kafka.%s; sdk.%s has no fields", n.Sel.Name, name, name)
			}
		}
		if fn := kafkaFunc(info, n.Sel); fn == "NewReader" || fn == "NewWriter" {
			if call, ok := c.Parent().(*ast.CallExpr); !ok || call.Fun != n {
				m.refuse(u, n.Pos(), "kafka.%s used as a function value; the migration rewrites its calls only (wrap it in a func literal calling it)", fn)
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
		if name := statsType(info.TypeOf(n)); name != "" && n.Type == nil && m.kafkaName(f, n.Pos()) == "" {
			m.refuse(u, n.Pos(), "a kafka.%s literal with its type elided where kafka-go's package is not in scope by name", name)
		}
	}
}

// checkByValue refuses kafka.Writer or kafka.Reader, at c, written other
// than as *kafka.Writer or &kafka.Writer{...} (checkLiteral): a variable,
// field, parameter, element or type argument holding one by value.
func (m *migration) checkByValue(u *unit, c *astutil.Cursor, n *ast.SelectorExpr, name string) {
	switch p := c.Parent().(type) {
	case *ast.StarExpr:
		return
	case *ast.CompositeLit:
		if p.Type == n {
			return
		}
	case *ast.CallExpr: // new(kafka.Writer): checkLiteral
		if len(p.Args) == 1 && p.Args[0] == n {
			return
		}
	}
	m.refuse(u, n.Pos(), "holds a kafka.%s by value; sdk.%s is used through a pointer", name, name)
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
			m.checkWriterLiteral(u, f, n)
			return
		}
		m.refuse(u, n.Pos(), "a kafka.%s literal used by value; sdk.%s comes from its constructor", name, name)
	case *ast.StarExpr:
		if tv, ok := f.info.Types[n]; ok && tv.IsValue() {
			if name, _ := kafkaType(f.info.TypeOf(n.X)); name != "" && !m.outside(f, n.X) {
				m.refuse(u, n.Pos(), "copies a kafka.%s (%s); an sdk.%s is used through its pointer, and a copy would share its engine", name, exprString(n), name)
			}
		}
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

// checkWriterLiteral refuses a &kafka.Writer{...} that sdk.MustNewWriter
// would panic on where kafka-go's literal is valid until its first write:
// one without Addr, and one whose Transport is not a *kafka.Transport
// (or is one only at run time, through kafka.RoundTripper).
func (m *migration) checkWriterLiteral(u *unit, f *file, lit *ast.CompositeLit) {
	addr := false
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return // positional: every field is given
		}
		key, ok := kv.Key.(*ast.Ident)
		if !ok {
			continue
		}
		switch key.Name {
		case "Addr":
			addr = true
		case "Transport":
			t := f.info.TypeOf(kv.Value)
			if p, ok := types.Unalias(t).(*types.Pointer); ok {
				if n, ok := types.Unalias(p.Elem()).(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == kafkaPath && n.Obj().Name() == "Transport" {
					continue
				}
			}
			if b, ok := t.(*types.Basic); ok && b.Kind() == types.UntypedNil {
				continue
			}
			m.refuse(u, kv.Pos(), "a kafka.Writer whose Transport is a %s: sdk.MustNewWriter takes a *kafka.Transport (or none) and would panic here; give it a *kafka.Transport, or leave this Writer on kafka-go", typeString(t))
		}
	}
	if !addr {
		m.refuse(u, lit.Pos(), "a kafka.Writer literal without Addr: sdk.MustNewWriter needs the address when it is built and would panic here (kafka-go's fails at the first write); set Addr in the literal")
	}
}

// checkCall refuses kafka.NewWriter, and a Writer or Reader given to
// package reflect (the comparison of the arguments' types with the
// parameters' is flow.go's).
func (m *migration) checkCall(u *unit, f *file, call *ast.CallExpr) {
	info := f.info
	fn := calleeFunc(info, call)
	if fn == nil || fn.Pkg() == nil {
		return
	}
	switch fn.Pkg().Path() {
	case kafkaPath:
		switch fn.Name() {
		case "NewReader":
			u.mentions = true
		case "NewWriter":
			if fn.Type().(*types.Signature).Recv() == nil {
				u.mentions = true
				m.refuse(u, call.Pos(), "kafka.NewWriter(kafka.WriterConfig{...}) (deprecated): %s", newWriterReason)
			}
		}
	case "reflect":
		for _, arg := range call.Args {
			if name, _ := kafkaType(info.TypeOf(arg)); name != "" && !m.outside(f, arg) {
				m.refuse(u, arg.Pos(), "a kafka.%s goes to reflect.%s, which would see sdk.%s's unexported fields", name, fn.Name(), name)
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
		switch x := fun.X.(type) {
		case *ast.SelectorExpr:
			id = x.Sel
		case *ast.Ident:
			id = x
		}
	case *ast.IndexListExpr:
		switch x := fun.X.(type) {
		case *ast.SelectorExpr:
			id = x.Sel
		case *ast.Ident:
			id = x
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
	modules := map[string]bool{}
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
				if mod := u.module; mod != nil && !modules[mod.Path] {
					modules[mod.Path] = true
					res.Modules = append(res.Modules, Module{Path: mod.Path, Dir: mod.Dir, GoMod: mod.GoMod})
				}
			}
		}
	}
	sort.SliceStable(res.Refused, func(i, j int) bool {
		a, b := res.Refused[i].Pos, res.Refused[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
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
	info := f.info
	n := 0
	// sdkIDs are the identifiers naming package sdk the rewrite writes,
	// with the positions of the sites: their name is chosen once all are
	// known (sdkImportName).
	var sdkIDs []*ast.Ident
	var sites []token.Pos
	// kafkaAdded: the rewrite wrote a reference to kafka-go's package.
	kafkaAdded := false
	sdkSel := func(name string, pos token.Pos) *ast.SelectorExpr {
		id := ast.NewIdent("sdk")
		sdkIDs, sites = append(sdkIDs, id), append(sites, pos)
		return &ast.SelectorExpr{X: id, Sel: ast.NewIdent(name)}
	}
	// wrapped: expressions already given to a function of sdk or put in
	// a literal of one of its types.
	wrapped := map[ast.Expr]bool{}
	ast.Inspect(f.ast, func(node ast.Node) bool {
		switch node := node.(type) {
		case *ast.CallExpr:
			if fn := calleeFunc(info, node); fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == sdkPath {
				for _, a := range node.Args {
					wrapped[ast.Unparen(a)] = true
				}
			}
		case *ast.CompositeLit:
			if t, ok := types.Unalias(info.TypeOf(node)).(*types.Named); ok && t.Obj().Pkg() != nil && t.Obj().Pkg().Path() == sdkPath {
				for _, el := range node.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						el = kv.Value
					}
					wrapped[ast.Unparen(el)] = true
				}
			}
		}
		return true
	})
	astutil.Apply(f.ast, func(c *astutil.Cursor) bool {
		switch node := c.Node().(type) {
		case *ast.StarExpr:
			if name := kafkaTypeName(info, node.X); name == "Writer" || name == "Reader" {
				c.Replace(&ast.StarExpr{Star: node.Star, X: sdkSel(name, node.Pos())})
				n++
				return false
			}
		case *ast.SelectorExpr:
			if name := kafkaTypeName(info, node); name == "WriterStats" || name == "ReaderStats" {
				if lit, ok := c.Parent().(*ast.CompositeLit); !ok || lit.Type != node {
					c.Replace(sdkSel(name, node.Pos()))
					n++
				}
				return false
			}
		case *ast.CompositeLit:
			name := statsType(info.TypeOf(node))
			if name == "" || wrapped[node] {
				break
			}
			// sdk.WriterStats{WriterStats: kafka.WriterStats{...}}
			inner := node
			if node.Type == nil { // an element of a []kafka.WriterStats{...}
				kafkaID := ast.NewIdent(m.kafkaName(f, node.Pos()))
				kafkaAdded = true
				inner = &ast.CompositeLit{Type: &ast.SelectorExpr{X: kafkaID, Sel: ast.NewIdent(name)}, Lbrace: node.Lbrace, Elts: node.Elts, Rbrace: node.Rbrace}
			}
			outer := &ast.CompositeLit{Lbrace: node.Lbrace, Rbrace: node.Rbrace,
				Elts: []ast.Expr{&ast.KeyValueExpr{Key: ast.NewIdent(name), Value: inner}}}
			if node.Type != nil {
				outer.Type = sdkSel(name, node.Pos())
			}
			c.Replace(outer)
			n++
			return false
		case *ast.CallExpr:
			if fn := calleeFunc(info, node); fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == kafkaPath && fn.Name() == "NewReader" &&
				fn.Type().(*types.Signature).Recv() == nil {
				node.Fun = sdkSel("MustNewReader", node.Pos())
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
				c.Replace(&ast.CallExpr{Fun: sdkSel(ctor, node.Pos()), Args: []ast.Expr{node}})
				n++
				return false
			}
		}
		return true
	}, nil)
	if n == 0 {
		return 0
	}
	sdkName, imported := m.sdkImportName(f, sites)
	for _, id := range sdkIDs {
		id.Name = sdkName
	}
	switch {
	case imported:
	case sdkName == "sdk":
		astutil.AddImport(m.fset, f.ast, sdkPath)
	default:
		astutil.AddNamedImport(m.fset, f.ast, sdkName, sdkPath)
	}
	if !kafkaAdded && !m.usesKafka(f) {
		name := ""
		for _, imp := range f.ast.Imports {
			if importPath(imp) == kafkaPath && imp.Name != nil {
				name = imp.Name.Name
			}
		}
		astutil.DeleteNamedImport(m.fset, f.ast, name, kafkaPath)
	}
	return n
}

// sdkImportName is the name the rewritten sites of f refer to package sdk
// by: the file's own import's, else "sdk", else "azsdk", "azsdk2", ...,
// the first that no declaration of the package or the file, nor of a
// scope around one of the sites, takes. imported: f imports sdk by that
// name already.
func (m *migration) sdkImportName(f *file, sites []token.Pos) (name string, imported bool) {
	var names []string
	for _, imp := range f.ast.Imports {
		if importPath(imp) == sdkPath {
			if pn := f.info.PkgNameOf(imp); pn != nil && pn.Name() != "_" && pn.Name() != "." {
				names = append(names, pn.Name())
			}
		}
	}
	own := len(names)
	names = append(names, "sdk", "azsdk")
	for i := 2; ; i++ {
		for j, n := range names {
			if m.nameFree(f, n, sites) {
				return n, j < own
			}
		}
		names = []string{"azsdk" + strconv.Itoa(i)}
		own = 0
	}
}

// nameFree reports whether name may refer to package sdk at every one of
// sites of f: nothing else of that name is declared in the package, the
// file or a scope around a site before it.
func (m *migration) nameFree(f *file, name string, sites []token.Pos) bool {
	if f.pkg.Scope().Lookup(name) != nil {
		return false
	}
	isSDK := func(obj types.Object) bool {
		pn, ok := obj.(*types.PkgName)
		return ok && pn.Imported().Path() == sdkPath
	}
	for _, imp := range f.ast.Imports {
		if pn := f.info.PkgNameOf(imp); pn != nil && pn.Name() == name && !isSDK(pn) {
			return false
		}
	}
	for _, pos := range sites {
		s := f.pkg.Scope().Innermost(pos)
		if s == nil {
			continue
		}
		if _, obj := s.LookupParent(name, pos); obj != nil && !isSDK(obj) {
			return false
		}
	}
	return true
}

// kafkaName is the name kafka-go's package has at pos in f, "" when it
// has none there.
func (m *migration) kafkaName(f *file, pos token.Pos) string {
	for _, imp := range f.ast.Imports {
		pn := f.info.PkgNameOf(imp)
		if pn == nil || pn.Imported().Path() != kafkaPath || pn.Name() == "_" || pn.Name() == "." {
			continue
		}
		if s := f.pkg.Scope().Innermost(pos); s != nil {
			if _, obj := s.LookupParent(pn.Name(), pos); obj == pn {
				return pn.Name()
			}
		}
	}
	return ""
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
