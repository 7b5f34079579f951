package toolcall

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOneDoor reads mcpgateway's code and fails when a tool call can bypass the pipeline:
// only this package reaches the dispatch (upstream's DispatchToolCall and ResumeToolCall, the
// built-in provider's CallBuiltin) and decides approvals (serverconfig.NeedsApproval); each
// entry point is named by the one package that serves it, and that package hands its calls to
// Invoke. A new entry point must be added to Entries and to entryHomes below, and call Invoke;
// upstream's generic calls refuse tools/call at run time (upstream.ErrBypass).
func TestOneDoor(t *testing.T) {
	// The package each entry point lives in.
	entryHomes := map[string]string{
		"EntryAdmin":  "admin",
		"EntryMCP":    "mcpserve",
		"EntryServer": "federate",
		"EntryPreset": "aggregate",
		"EntryChat":   "toolchat",
		"EntrySearch": "aggregate",
	}
	if len(entryHomes) != len(Entries) {
		t.Fatalf("Entries has %d entry points, entryHomes %d: name the package of each", len(Entries), len(entryHomes))
	}
	onlyHere := []string{"DispatchToolCall", "ResumeToolCall", "CallBuiltin", "NeedsApproval"}
	used := map[string]map[string]bool{} // selector → packages that use it
	invokers := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		pkg := filepath.Base(filepath.Dir(path))
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			name := sel.Sel.Name
			if used[name] == nil {
				used[name] = map[string]bool{}
			}
			used[name][pkg] = true
			if name == "Invoke" {
				invokers[pkg] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range onlyHere {
		for pkg := range used[name] {
			if pkg != "toolcall" {
				t.Errorf("package %s uses %s: only the tool-call pipeline may (a path that calls it skips the chain)", pkg, name)
			}
		}
	}
	for entry, home := range entryHomes {
		var users []string
		for pkg := range used[entry] {
			if pkg != "toolcall" {
				users = append(users, pkg)
			}
		}
		slices.Sort(users)
		if !slices.Equal(users, []string{home}) {
			t.Errorf("toolcall.%s is used by %v; want %s, its entry point, alone", entry, users, home)
		}
		if !invokers[home] {
			t.Errorf("package %s serves toolcall.%s but never calls Invoke", home, entry)
		}
	}
}
