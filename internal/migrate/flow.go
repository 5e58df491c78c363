package migrate

// flow.go finds the values whose types the rewrite would change on one
// side only. The rewrite changes the kafka-go types written in the given
// packages; those written outside them (another module, a package not
// given) stay kafka-go's. So at every place a value goes somewhere (an
// argument, an assignment, a return, a composite literal's element, a
// send, a comparison, a conversion, an interface conversion), each side
// is classed by where its type was written, and a site is refused when
// the two differ and the types hold kafka.Writer, Reader, WriterStats or
// ReaderStats (or, into an interface, when a method of the interface and
// the method implementing it differ so).

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
)

// initExpr is the expression a variable declared without a type takes its
// type from.
type initExpr struct {
	f *file
	e ast.Expr
}

// collectInits records the variables f declares without a type
// (x := e, var x = e, for k, v := range e) with the expression they
// take their type from.
func (m *migration) collectInits(f *file) {
	info := f.info
	def := func(id ast.Expr, e ast.Expr) {
		if id, ok := id.(*ast.Ident); ok && e != nil {
			if obj := info.Defs[id]; obj != nil {
				m.inits[obj.Pos()] = initExpr{f, e}
			}
		}
	}
	ast.Inspect(f.ast, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok != token.DEFINE {
				break
			}
			for i, l := range n.Lhs {
				if len(n.Rhs) == len(n.Lhs) {
					def(l, n.Rhs[i])
				} else if len(n.Rhs) == 1 {
					def(l, n.Rhs[0])
				}
			}
		case *ast.ValueSpec:
			if n.Type != nil {
				break
			}
			for i, id := range n.Names {
				if len(n.Values) == len(n.Names) {
					def(id, n.Values[i])
				} else if len(n.Values) == 1 {
					def(id, n.Values[0])
				}
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				def(n.Key, n.X)
				def(n.Value, n.X)
			}
		}
		return true
	})
}

// pkgOutside reports whether p's code is left as it is by the rewrite.
func (m *migration) pkgOutside(p *types.Package) bool {
	if p == nil {
		return false
	}
	path := p.Path()
	trimmed := path
	if len(trimmed) > 5 && trimmed[len(trimmed)-5:] == "_test" {
		trimmed = trimmed[:len(trimmed)-5]
	}
	return !m.given[path] && !m.given[trimmed] && path != kafkaPath && path != sdkPath
}

// outside reports whether the type of e's value comes from code the
// rewrite leaves, so that it keeps kafka-go's types.
func (m *migration) outside(f *file, e ast.Expr) bool { return m.outsideDepth(f, e, 0) }

func (m *migration) outsideDepth(f *file, e ast.Expr, depth int) bool {
	if depth > 32 {
		return false
	}
	info := f.info
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		obj := info.Uses[e]
		if obj == nil {
			obj = info.Defs[e]
		}
		return m.objOutside(obj, depth)
	case *ast.SelectorExpr:
		if sel := info.Selections[e]; sel != nil {
			switch sel.Kind() {
			case types.FieldVal:
				return m.pkgOutside(sel.Obj().Pkg())
			case types.MethodVal:
				if p := sel.Obj().Pkg(); p != nil && p.Path() == kafkaPath {
					return m.outsideDepth(f, e.X, depth+1) // a kafka-go method: its receiver's
				}
				return m.pkgOutside(sel.Obj().Pkg())
			default:
				return m.pkgOutside(sel.Obj().Pkg())
			}
		}
		return m.objOutside(info.Uses[e.Sel], depth)
	case *ast.CallExpr:
		return m.callOutside(f, e, depth)
	case *ast.StarExpr:
		return m.outsideDepth(f, e.X, depth+1)
	case *ast.UnaryExpr:
		if e.Op == token.AND || e.Op == token.ARROW {
			return m.outsideDepth(f, e.X, depth+1)
		}
	case *ast.IndexExpr:
		return m.outsideDepth(f, e.X, depth+1)
	case *ast.IndexListExpr:
		return m.outsideDepth(f, e.X, depth+1)
	case *ast.SliceExpr:
		return m.outsideDepth(f, e.X, depth+1)
	}
	return false // literals, type assertions, conversions: types written here
}

func (m *migration) objOutside(obj types.Object, depth int) bool {
	switch obj := obj.(type) {
	case *types.Var:
		if m.pkgOutside(obj.Pkg()) {
			return true
		}
		if in, ok := m.inits[obj.Pos()]; ok {
			return m.outsideDepth(in.f, in.e, depth+1)
		}
	case *types.Func:
		return m.pkgOutside(obj.Pkg())
	}
	return false
}

// callOutside reports whether call's results keep kafka-go's types.
func (m *migration) callOutside(f *file, call *ast.CallExpr, depth int) bool {
	info := f.info
	tv := info.Types[call.Fun]
	if tv.IsType() {
		return false // a conversion to a type written here
	}
	if tv.IsBuiltin() {
		if id, ok := ast.Unparen(call.Fun).(*ast.Ident); ok && id.Name == "append" && len(call.Args) > 0 {
			return m.outsideDepth(f, call.Args[0], depth+1)
		}
		return false
	}
	fn := calleeFunc(info, call)
	if fn == nil {
		return m.outsideDepth(f, call.Fun, depth+1) // a function value
	}
	if fn.Pkg() != nil && fn.Pkg().Path() == kafkaPath {
		if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok && fn.Type().(*types.Signature).Recv() != nil {
			return m.outsideDepth(f, sel.X, depth+1) // Stats() of a Writer left kafka-go's
		}
		return false // NewReader becomes MustNewReader
	}
	if !m.pkgOutside(fn.Pkg()) {
		return false
	}
	if generic(fn) {
		// Its results' types come from its type arguments: written here,
		// or inferred from the arguments.
		for _, a := range call.Args {
			if kafkaish(info.TypeOf(a)) && m.outsideDepth(f, a, depth+1) {
				return true
			}
		}
		return !hasTypeParam(fn.Origin().Type().(*types.Signature).Results())
	}
	return true
}

// generic reports whether fn or its receiver's type has type parameters.
func generic(fn *types.Func) bool {
	sig := fn.Origin().Type().(*types.Signature)
	return sig.TypeParams().Len() > 0 || sig.RecvTypeParams().Len() > 0
}

// hasTypeParam reports whether t mentions a type parameter.
func hasTypeParam(t types.Type) bool {
	found := false
	walkType(t, map[types.Type]bool{}, func(t types.Type) bool {
		if _, ok := t.(*types.TypeParam); ok {
			found = true
		}
		return !found
	})
	return found
}

// kafkaish reports whether t holds kafka-go's Writer, Reader, WriterStats
// or ReaderStats in a part the rewrite changes: through pointers,
// slices, arrays, maps, channels, functions, struct and interface
// literals and type arguments, not through other named types (the
// rewrite keeps their identity).
func kafkaish(t types.Type) bool {
	found := false
	walkType(t, map[types.Type]bool{}, func(t types.Type) bool {
		if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == kafkaPath {
			switch n.Obj().Name() {
			case "Writer", "Reader", "WriterStats", "ReaderStats":
				found = true
			}
		}
		return !found
	})
	return found
}

// walkType calls visit on t and the types it is made of, down to named
// types (whose type arguments it visits), while visit returns true.
func walkType(t types.Type, seen map[types.Type]bool, visit func(types.Type) bool) {
	if t == nil {
		return
	}
	t = types.Unalias(t)
	if seen[t] || !visit(t) {
		return
	}
	seen[t] = true
	walk := func(t types.Type) { walkType(t, seen, visit) }
	switch t := t.(type) {
	case *types.Named:
		for i := range t.TypeArgs().Len() {
			walk(t.TypeArgs().At(i))
		}
	case *types.Pointer:
		walk(t.Elem())
	case *types.Slice:
		walk(t.Elem())
	case *types.Array:
		walk(t.Elem())
	case *types.Chan:
		walk(t.Elem())
	case *types.Map:
		walk(t.Key())
		walk(t.Elem())
	case *types.Signature:
		walk(t.Params())
		walk(t.Results())
	case *types.Tuple:
		for i := range t.Len() {
			walk(t.At(i).Type())
		}
	case *types.Struct:
		for i := range t.NumFields() {
			walk(t.Field(i).Type())
		}
	case *types.Interface:
		for i := range t.NumMethods() {
			walk(t.Method(i).Type())
		}
	}
}

// nonKafkaNamed is t as a named type other than the four the rewrite
// changes.
func nonKafkaNamed(t types.Type) (*types.Named, bool) {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || statsType(n) != "" {
		return nil, false
	}
	if name, _ := kafkaType(n); name != "" {
		return nil, false
	}
	return n, true
}

// conflict reports whether a value of type s, whose type is outside's
// when sOut, no longer fits a destination of type d (outside's when
// dOut) once the rewrite changed the types written in the given
// packages; method names the interface method that no longer matches.
func (m *migration) conflict(s types.Type, sOut bool, d types.Type, dOut bool) (method string, bad bool) {
	if s == nil || d == nil {
		return "", false
	}
	if b, ok := s.(*types.Basic); ok && b.Info()&types.IsUntyped != 0 {
		return "", false // nil, a constant
	}
	if _, ok := s.(*types.Tuple); ok {
		return "", false
	}
	if types.IsInterface(d) {
		if types.Identical(s, d) {
			if _, named := nonKafkaNamed(d); named {
				return "", false
			}
			return "", sOut != dOut && kafkaish(d)
		}
		iface, ok := d.Underlying().(*types.Interface)
		if !ok {
			return "", false
		}
		for i := range iface.NumMethods() {
			dm := iface.Method(i)
			if !kafkaish(dm.Type()) {
				continue
			}
			obj, _, _ := types.LookupFieldOrMethod(s, true, dm.Pkg(), dm.Name())
			sm, ok := obj.(*types.Func)
			if !ok {
				continue
			}
			if m.methodOutside(sm, sOut) != m.pkgOutside(dm.Pkg()) {
				return dm.Name(), true
			}
		}
		return "", false
	}
	sn, sNamed := nonKafkaNamed(s)
	dn, dNamed := nonKafkaNamed(d)
	switch {
	case sNamed && dNamed:
		return "", false // the same named type on both sides
	case sNamed:
		s, sOut = sn.Underlying(), m.pkgOutside(sn.Obj().Pkg())
	case dNamed:
		d, dOut = dn.Underlying(), m.pkgOutside(dn.Obj().Pkg())
	}
	return "", sOut != dOut && (kafkaish(s) || kafkaish(d))
}

// methodOutside reports whether method fn of a value (outside's when
// valueOut) keeps kafka-go's types: kafka-go's Writer's and Reader's
// methods become sdk's with the value.
func (m *migration) methodOutside(fn *types.Func, valueOut bool) bool {
	if fn.Pkg() != nil && fn.Pkg().Path() == kafkaPath {
		return valueOut
	}
	return m.pkgOutside(fn.Pkg())
}

// dest is where a value goes, for the reason of a refusal.
type dest struct {
	to   string // "goes to thirdparty.Instrument"
	verb string // "takes", "holds"
	out  bool   // its type is written outside the given packages
	typ  types.Type
	pkg  string // the package of the function called, if known
}

// formatsOnly are the packages whose functions take any and only format
// it: a Writer or Reader given to them is no flow to code that could
// assert kafka-go's type.
var formatsOnly = map[string]bool{"fmt": true, "log": true, "log/slog": true, "testing": true}

// flowTo refuses e, of type s, going to d when the rewrite would change
// the type of one side only.
func (w *walker) flowTo(e ast.Expr, s types.Type, d dest) {
	sOut := w.m.outside(w.f, e)
	if d.out && !sOut && !formatsOnly[d.pkg] && emptyInterface(d.typ) && kafkaish(s) {
		w.m.refuse(w.u, e.Pos(), "a %s %s as a %s, outside the packages migrated: code there may assert or reflect on kafka-go's type, which the value would no longer have", typeString(s), d.to, typeString(d.typ))
		return
	}
	method, bad := w.m.conflict(s, sOut, d.typ, d.out)
	if !bad {
		return
	}
	m, u := w.m, w.u
	ts, td := typeString(s), typeString(d.typ)
	switch {
	case method != "":
		m.refuse(u, e.Pos(), "a %s %s as a %s, which it would no longer implement: after the rewrite method %s has the SDK's types on one side and kafka-go's on the other (one is outside the packages migrated)", ts, d.to, td, method)
	case d.out:
		m.refuse(u, e.Pos(), "a %s %s, outside the packages migrated, which %s a %s", ts, d.to, d.verb, td)
	default:
		m.refuse(u, e.Pos(), "%s, a %s of code outside the packages migrated, %s, which the migration makes the SDK's", exprString(e), ts, d.to)
	}
}

// emptyInterface reports whether t is the empty interface (any), not a
// type parameter.
func emptyInterface(t types.Type) bool {
	if _, ok := types.Unalias(t).(*types.TypeParam); ok {
		return false // generic code keeps the value's own type
	}
	i, ok := t.Underlying().(*types.Interface)
	return ok && i.Empty()
}

func typeString(t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string { return p.Name() })
}

func exprString(e ast.Expr) string {
	s := types.ExprString(e)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// flow compares the types at n where a value goes somewhere.
func (w *walker) flow(n ast.Node) {
	info := w.f.info
	switch n := n.(type) {
	case *ast.CallExpr:
		w.flowCall(n)
	case *ast.AssignStmt:
		if n.Tok != token.ASSIGN && n.Tok != token.DEFINE {
			return
		}
		for i, l := range n.Lhs {
			if id, ok := l.(*ast.Ident); ok && (id.Name == "_" || n.Tok == token.DEFINE && info.Defs[id] != nil) {
				continue // a new variable takes the value's type
			}
			d := dest{to: "is assigned to " + exprString(l), verb: "holds", typ: info.TypeOf(l), out: w.m.outside(w.f, l)}
			switch {
			case len(n.Rhs) == len(n.Lhs):
				w.flowTo(n.Rhs[i], info.TypeOf(n.Rhs[i]), d)
			case len(n.Rhs) == 1:
				if t, ok := info.TypeOf(n.Rhs[0]).(*types.Tuple); ok && i < t.Len() {
					w.flowTo(n.Rhs[0], t.At(i).Type(), d)
				}
			}
		}
	case *ast.ValueSpec:
		if n.Type == nil {
			return
		}
		d := dest{to: "goes to a variable of type " + exprString(n.Type), typ: info.TypeOf(n.Type)}
		for i, v := range n.Values {
			if len(n.Values) == len(n.Names) {
				w.flowTo(v, info.TypeOf(v), d)
			} else if t, ok := info.TypeOf(v).(*types.Tuple); ok {
				for j := range t.Len() {
					w.flowTo(v, t.At(j).Type(), d)
				}
			}
			_ = i
		}
	case *ast.ReturnStmt:
		if len(w.sigs) == 0 || w.sigs[len(w.sigs)-1] == nil {
			return
		}
		res := w.sigs[len(w.sigs)-1].Results()
		switch {
		case len(n.Results) == res.Len():
			for i, r := range n.Results {
				w.flowTo(r, info.TypeOf(r), dest{to: "is returned", typ: res.At(i).Type()})
			}
		case len(n.Results) == 1:
			if t, ok := info.TypeOf(n.Results[0]).(*types.Tuple); ok {
				for i := range min(t.Len(), res.Len()) {
					w.flowTo(n.Results[0], t.At(i).Type(), dest{to: "is returned", typ: res.At(i).Type()})
				}
			}
		}
	case *ast.CompositeLit:
		w.flowLiteral(n)
	case *ast.SendStmt:
		if ch, ok := info.TypeOf(n.Chan).Underlying().(*types.Chan); ok {
			w.flowTo(n.Value, info.TypeOf(n.Value), dest{to: "is sent on " + exprString(n.Chan), verb: "carries", typ: ch.Elem(), out: w.m.outside(w.f, n.Chan)})
		}
	case *ast.RangeStmt:
		if n.Tok != token.ASSIGN {
			return
		}
		var elems []types.Type
		switch t := info.TypeOf(n.X).Underlying().(type) {
		case *types.Slice:
			elems = []types.Type{types.Typ[types.Int], t.Elem()}
		case *types.Array:
			elems = []types.Type{types.Typ[types.Int], t.Elem()}
		case *types.Map:
			elems = []types.Type{t.Key(), t.Elem()}
		case *types.Chan:
			elems = []types.Type{t.Elem()}
		}
		for i, l := range []ast.Expr{n.Key, n.Value} {
			if l == nil || i >= len(elems) {
				continue
			}
			if id, ok := l.(*ast.Ident); ok && id.Name == "_" {
				continue
			}
			// The element goes to l: compare as a value of X's side.
			method, bad := w.m.conflict(elems[i], w.m.outside(w.f, n.X), info.TypeOf(l), w.m.outside(w.f, l))
			if bad {
				w.m.refuse(w.u, l.Pos(), "the elements of %s (%s) go to %s, and the rewrite changes the types of one side only%s", exprString(n.X), typeString(info.TypeOf(n.X)), exprString(l), methodNote(method))
			}
		}
	case *ast.BinaryExpr:
		if n.Op != token.EQL && n.Op != token.NEQ {
			return
		}
		x, y := info.TypeOf(n.X), info.TypeOf(n.Y)
		if kafkaish(x) && kafkaish(y) {
			w.flowTo(n.Y, y, dest{to: "is compared with " + exprString(n.X), verb: "is a", typ: x, out: w.m.outside(w.f, n.X)})
		}
	}
}

func methodNote(method string) string {
	if method == "" {
		return ""
	}
	return fmt.Sprintf(" (method %s)", method)
}

// flowCall compares the arguments of call with the parameters they fill.
func (w *walker) flowCall(call *ast.CallExpr) {
	info := w.f.info
	tv := info.Types[call.Fun]
	if tv.IsType() {
		if len(call.Args) == 1 && kafkaish(tv.Type) {
			w.flowTo(call.Args[0], info.TypeOf(call.Args[0]), dest{to: "is converted to " + typeString(tv.Type), typ: tv.Type})
		}
		return
	}
	if tv.IsBuiltin() {
		id, ok := ast.Unparen(call.Fun).(*ast.Ident)
		if !ok || len(call.Args) < 2 || id.Name != "append" && id.Name != "copy" {
			return
		}
		s := info.TypeOf(call.Args[0])
		sl, ok := s.Underlying().(*types.Slice)
		if !ok {
			return
		}
		d := dest{to: "goes to " + id.Name + " on " + exprString(call.Args[0]), verb: "holds", typ: sl.Elem(), out: w.m.outside(w.f, call.Args[0])}
		for i, a := range call.Args[1:] {
			if id.Name == "copy" || call.Ellipsis.IsValid() && i == len(call.Args)-2 {
				d.typ = s
			}
			w.flowTo(a, info.TypeOf(a), d)
		}
		return
	}
	sig, ok := tv.Type.Underlying().(*types.Signature)
	if !ok {
		return
	}
	fn := calleeFunc(info, call)
	var origin *types.Signature
	d := dest{verb: "takes"}
	if fn != nil {
		if p := fn.Pkg(); p != nil && (p.Path() == kafkaPath || p.Path() == sdkPath || p.Path() == "reflect") {
			return // kafka-go's and sdk's functions the migration maps; reflect: checkCall
		}
		d.out = w.m.pkgOutside(fn.Pkg())
		d.to = "goes to " + funcName(fn)
		if fn.Pkg() != nil {
			d.pkg = fn.Pkg().Path()
		}
		if generic(fn) {
			origin = fn.Origin().Type().(*types.Signature)
		}
	} else {
		d.out = w.m.outside(w.f, call.Fun)
		d.to = "goes to " + exprString(call.Fun)
	}
	args := call.Args
	if len(args) == 1 && sig.Params().Len() > 1 {
		if t, ok := info.TypeOf(args[0]).(*types.Tuple); ok {
			for i := range min(t.Len(), sig.Params().Len()) {
				d.typ = sig.Params().At(i).Type()
				w.flowTo(args[0], t.At(i).Type(), d)
			}
			return
		}
	}
	for i, a := range args {
		pt := paramType(sig, i)
		if call.Ellipsis.IsValid() && i == len(args)-1 {
			pt = sig.Params().At(sig.Params().Len() - 1).Type()
		}
		if pt == nil {
			continue
		}
		if origin != nil {
			// A parameter typed by a type parameter takes the argument's
			// type: nothing to compare.
			if op := paramType(origin, i); op == nil || hasTypeParam(op) {
				continue
			}
		}
		d.typ = pt
		w.flowTo(a, info.TypeOf(a), d)
	}
}

// funcName is fn as its package's name qualifies it.
func funcName(fn *types.Func) string {
	sig := fn.Type().(*types.Signature)
	if r := sig.Recv(); r != nil {
		t := r.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		return typeString(t) + "." + fn.Name()
	}
	if fn.Pkg() == nil {
		return fn.Name()
	}
	return fn.Pkg().Name() + "." + fn.Name()
}

// flowLiteral compares the elements of lit with the fields, elements and
// keys they fill.
func (w *walker) flowLiteral(lit *ast.CompositeLit) {
	info := w.f.info
	t := info.TypeOf(lit)
	if t == nil {
		return
	}
	if p, ok := t.(*types.Pointer); ok { // &T{} elided in a []*T{...}
		t = p.Elem()
	}
	out, name := w.elided[lit], ""
	if n, ok := types.Unalias(t).(*types.Named); ok {
		if p := n.Obj().Pkg(); p != nil && p.Path() == sdkPath {
			return // sdk's own types: kafka-go's where they say so
		}
		out, name = w.m.pkgOutside(n.Obj().Pkg()), typeString(n)
	} else if lit.Type != nil {
		out = false // written here
	}
	into := func(what string) string {
		if name == "" {
			return "goes into a " + typeString(t) + what
		}
		return "goes into a " + name + what
	}
	mark := func(v ast.Expr, elemOut bool) {
		if c, ok := ast.Unparen(v).(*ast.CompositeLit); ok && c.Type == nil {
			w.elided[c] = elemOut
		} else if u, ok := v.(*ast.UnaryExpr); ok && u.Op == token.AND {
			if c, ok := u.X.(*ast.CompositeLit); ok && c.Type == nil {
				w.elided[c] = elemOut
			}
		}
	}
	switch u := t.Underlying().(type) {
	case *types.Struct:
		for i, el := range lit.Elts {
			var field *types.Var
			v := el
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				v = kv.Value
				if id, ok := kv.Key.(*ast.Ident); ok {
					field, _ = info.Uses[id].(*types.Var)
				}
			} else if i < u.NumFields() {
				field = u.Field(i)
			}
			if field == nil {
				continue
			}
			w.flowTo(v, info.TypeOf(v), dest{to: into(" (field " + field.Name() + ")"), verb: "holds", typ: field.Type(), out: w.m.pkgOutside(field.Pkg())})
		}
	case *types.Slice, *types.Array, *types.Map:
		var key, elem types.Type
		switch u := u.(type) {
		case *types.Slice:
			elem = u.Elem()
		case *types.Array:
			elem = u.Elem()
		case *types.Map:
			key, elem = u.Key(), u.Elem()
		}
		for _, el := range lit.Elts {
			v := el
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				v = kv.Value
				if key != nil {
					mark(kv.Key, out)
					w.flowTo(kv.Key, info.TypeOf(kv.Key), dest{to: into(" as a key"), verb: "holds", typ: key, out: out})
				}
			}
			mark(v, out)
			w.flowTo(v, info.TypeOf(v), dest{to: into(""), verb: "holds", typ: elem, out: out})
		}
	}
}
