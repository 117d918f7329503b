package test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFuncLines is the longest a production function may be, from its func
// line to its closing brace: what a reader holds in one screen. The forks
// keep their upstream's shape, and tests read best as one story each.
const maxFuncLines = 80

// longFuncs is every function declared in the module's non-test Go files
// outside the forks, testdata and test/ that is longer than max lines,
// as "path:line Name (N lines)", in the order of path and line.
func longFuncs(t *testing.T, module string, max int) []string {
	skip := map[string]bool{
		"internal/ninep/p9fork":    true,
		"internal/ninep/srv9pfork": true,
		"test":                     true,
	}
	type over struct {
		path       string
		line, size int
		name       string
	}
	fset := token.NewFileSet()
	var long []over
	err := filepath.WalkDir(module, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(module, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (skip[rel] || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); rel != "." && err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			first, last := fset.Position(fn.Pos()).Line, fset.Position(fn.Body.Rbrace).Line
			if n := last - first + 1; n > max {
				long = append(long, over{rel, first, n, funcName(fn)})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(long, func(i, j int) bool {
		if long[i].path != long[j].path {
			return long[i].path < long[j].path
		}
		return long[i].line < long[j].line
	})
	var out []string
	for _, o := range long {
		out = append(out, fmt.Sprintf("%s:%d %s (%d lines)", o.path, o.line, o.name, o.size))
	}
	return out
}

// funcName is a declaration's name as a reader looks it up: Recv.Name
// for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}

// TestFuncLength: no production function outside the forks is longer than
// maxFuncLines, func line to closing brace; each one over is named.
func TestFuncLength(t *testing.T) {
	t.Parallel()
	for _, l := range longFuncs(t, "..", maxFuncLines) {
		t.Errorf("%s: longer than %d lines; split it where it does two things, each piece named for what it does", l, maxFuncLines)
	}
}

// TestFuncLengthCounts: the count runs from the func line to the closing
// brace, both included, and skips what it is told to skip.
func TestFuncLengthCounts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := func(n int) string { return strings.Repeat("\t_ = 0\n", n) }
	files := map[string]string{
		"go.mod":                          "module m\n",
		"a.go":                            "package a\n\n// F is long.\nfunc F() {\n" + body(3) + "}\n\ntype T struct{}\n\nfunc (t *T) M() {\n" + body(1) + "}\n",
		"a_test.go":                       "package a\n\nfunc G() {\n" + body(10) + "}\n",
		"testdata/x.go":                   "package x\n\nfunc H() {\n" + body(10) + "}\n",
		"internal/ninep/p9fork/p9/p9.go":  "package p9\n\nfunc I() {\n" + body(10) + "}\n",
		"internal/ninep/srv9pfork/s/s.go": "package s\n\nfunc J() {\n" + body(10) + "}\n",
		"test/t.go":                       "package test\n\nfunc K() {\n" + body(10) + "}\n",
		"sub/go.mod":                      "module sub\n",
		"sub/s.go":                        "package sub\n\nfunc L() {\n" + body(10) + "}\n",
	}
	for name, src := range files {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(src), 0o644))
	}
	// F is 5 lines (func, 3 statements, brace), T.M 3 (at line 12).
	for _, tc := range []struct {
		max  int
		want string
	}{
		{5, ""},
		{4, "a.go:4 F (5 lines)"},
		{2, "a.go:4 F (5 lines),a.go:12 T.M (3 lines)"},
	} {
		if got := strings.Join(longFuncs(t, dir, tc.max), ","); got != tc.want {
			t.Errorf("over %d: %q, want %q", tc.max, got, tc.want)
		}
	}
}
