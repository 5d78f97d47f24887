package http

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// TestNoFatalFromGoroutines keeps this package's tests honest about t.Fatal: it stops only
// the goroutine that calls it (testing's documented rule), so a failing request in a
// goroutine would hang or mis-report the test. Any function of these tests that can reach
// Fatal/FailNow/Skip (directly or through another such function, matched by name) must not
// be called inside a `go` statement; goroutines use h.try and collect their errors.
func TestNoFatalFromGoroutines(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	bodies := map[string][]*ast.BlockStmt{} // function or method name -> bodies
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				bodies[fd.Name.Name] = append(bodies[fd.Name.Name], fd.Body)
			}
		}
	}
	fatal := map[string]bool{"Fatal": true, "Fatalf": true, "FailNow": true, "Skip": true, "Skipf": true, "SkipNow": true}
	calls := func(n ast.Node, names map[string]bool) (string, token.Pos) {
		var hit string
		var at token.Pos
		ast.Inspect(n, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok || hit != "" {
				return hit == ""
			}
			var name string
			switch fn := c.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			if names[name] {
				hit, at = name, c.Pos()
			}
			return true
		})
		return hit, at
	}
	// Grow the set of names that can fail the test until it stops changing.
	for changed := true; changed; {
		changed = false
		for name, bs := range bodies {
			if fatal[name] {
				continue
			}
			for _, b := range bs {
				if hit, _ := calls(b, fatal); hit != "" {
					fatal[name], changed = true, true
					break
				}
			}
		}
	}
	for _, af := range parsed {
		ast.Inspect(af, func(n ast.Node) bool {
			g, ok := n.(*ast.GoStmt)
			if !ok {
				return true
			}
			if hit, at := calls(g.Call, fatal); hit != "" {
				t.Errorf("%s: %s can call t.Fatal from a goroutine; use h.try and report after the goroutines finish", fset.Position(at), hit)
			}
			return true
		})
	}
}
