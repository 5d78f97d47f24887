package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestImportRules keeps the layout of STYLE.md: imports point down only
// (main → http → {alerts, ingest, query, auth} → {warehouse, store, limits, cond}, and
// warehouse → {store, cond}), cond is a leaf, and bbolt (store, warehouse), httprouter, the
// websocket library and cobra each stay in their packages.
func TestImportRules(t *testing.T) {
	allowed := map[string][]string{
		"cond":      {},
		"store":     {},
		"limits":    {},
		"warehouse": {"lookout/store", "lookout/cond"},
		"auth":      {"lookout/store", "lookout/limits"},
		"ingest":    {"lookout/warehouse", "lookout/store", "lookout/limits", "lookout/cond"},
		"query":     {"lookout/warehouse", "lookout/store", "lookout/limits", "lookout/cond"},
		"alerts":    {"lookout/warehouse", "lookout/store", "lookout/limits", "lookout/cond"},
		"http":      {"lookout/warehouse", "lookout/store", "lookout/limits", "lookout/cond", "lookout/auth", "lookout/ingest", "lookout/query", "lookout/alerts"},
	}
	owner := map[string][]string{
		"go.etcd.io/bbolt":                    {"store", "warehouse"},
		"github.com/julienschmidt/httprouter": {"http"},
		"github.com/coder/websocket":          {"http"},
		"github.com/spf13/cobra":              {"main"},
		"github.com/spf13/pflag":              {"main"},
	}
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		pkg := filepath.Dir(path)
		top := strings.Split(pkg, string(filepath.Separator))[0]
		if pkg == "." {
			top = "main"
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for lib, homes := range owner {
				if (p == lib || strings.HasPrefix(p, lib+"/")) && !slices.Contains(homes, top) {
					t.Errorf("%s imports %s, which only %v may import", path, p, homes)
				}
			}
			if !strings.HasPrefix(p, "lookout/") || top == "main" {
				continue
			}
			ok := false
			for _, a := range allowed[top] {
				if p == a || strings.HasPrefix(p, a+"/") {
					ok = true
				}
			}
			if !ok && !strings.HasPrefix(p, "lookout/"+top) {
				t.Errorf("%s imports %s: imports must point down (STYLE.md)", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("parsed only %d files: the walk is broken", files)
	}
}
