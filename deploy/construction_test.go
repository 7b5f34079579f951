package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// module is the import path every package of Zest starts with.
const module = "github.com/zestmcp/zest/"

// TestConstructionByOptions: in the services, the edge, lib and zestctl (tests included), what
// a constructor builds is complete when it returns: no exported field of a value that a New…
// or Start… function of Zest's own returned (a test's newFixture too) is assigned afterwards
// (a dependency is a constructor's argument or option), and no exported variable of another
// package of Zest is assigned (a package global set by the wiring is a hidden argument).
// Config structs, built field by field before they are passed, are neither. It reads the
// code (go/parser): a field set through a chain (x.y.Z) or a method is not seen.
func TestConstructionByOptions(t *testing.T) {
	for _, dir := range []string{"gateway", "services", "lib", "cli"} {
		err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.Contains(path, "/gen/") {
				return err
			}
			for _, v := range assignmentsAfterNew(t, path) {
				t.Error(v)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// assignmentsAfterNew lists the assignments of one file that TestConstructionByOptions
// refuses.
func assignmentsAfterNew(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	ours := map[string]bool{} // the names under which the file imports Zest's packages
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !strings.HasPrefix(p, module) {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		ours[name] = true
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			return true
		}
		// local variable → the constructor that returned it
		built := map[*ast.Object]string{} //nolint:staticcheck // parsed, not type-checked: Objects resolve one function's locals, all this needs
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok {
				return true
			}
			if as.Tok == token.DEFINE || as.Tok == token.ASSIGN {
				for i, lhs := range as.Lhs {
					id, ok := lhs.(*ast.Ident)
					if !ok || id.Obj == nil || len(as.Rhs) == 0 {
						continue
					}
					rhs := as.Rhs[min(i, len(as.Rhs)-1)]
					if c := constructor(rhs, ours); c != "" {
						built[id.Obj] = c
					}
				}
			}
			for _, lhs := range as.Lhs {
				sel, ok := lhs.(*ast.SelectorExpr)
				if !ok || !sel.Sel.IsExported() {
					continue
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					continue
				}
				pos := fset.Position(lhs.Pos())
				switch {
				case ours[x.Name] && x.Obj == nil:
					out = append(out, pos.String()+": "+x.Name+"."+sel.Sel.Name+" is another package's variable set from here: make it an argument or an option of what reads it")
				case x.Obj != nil && built[x.Obj] != "":
					out = append(out, pos.String()+": "+x.Name+"."+sel.Sel.Name+" is set after "+built[x.Obj]+" returned: make it an argument or an option of "+built[x.Obj])
				}
			}
			return true
		})
		return true
	})
	return out
}

// constructor names the call of e when it is a New… or Start… function of Zest's own (of
// this package, a test's newFixture too, or of an import of ours), else "".
func constructor(e ast.Expr, ours map[string]bool) string {
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = u.X
	}
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return ""
	}
	var name string
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		name = fun.Name
	case *ast.SelectorExpr:
		x, ok := fun.X.(*ast.Ident)
		if !ok || !ours[x.Name] {
			return ""
		}
		name = x.Name + "." + fun.Sel.Name
	default:
		return ""
	}
	base := name[strings.LastIndex(name, ".")+1:]
	for _, prefix := range []string{"New", "Start", "new", "start"} {
		if strings.HasPrefix(base, prefix) && (base == prefix || !strings.ContainsAny(base[len(prefix):len(prefix)+1], "abcdefghijklmnopqrstuvwxyz")) {
			return name
		}
	}
	return ""
}
