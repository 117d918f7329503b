package harness

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// derived are the directories whose code derives every harness from the
// Specs and names none: the layers below this package (proc, saferoot)
// and above it (the tree, the move, the daemon, the wire, the commands).
var derived = []string{"../proc", "../saferoot", "../tree", "../move", "../daemon", "../ninep", "../../cmd"}

// harnessWord says which harness name s holds as a word: s split at every
// byte that is not a letter or digit ("pi" is not in "pipe" nor "pid",
// but is in "pi/agent" and ".pi").
func harnessWord(s string) string {
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if harnessNames[strings.ToLower(w)] {
			return w
		}
	}
	return ""
}

// TestNoHarnessNamesOutside parses the non-test Go code of the derived
// packages and fails on a harness's name in a string literal that is a
// name, a path or a pattern (no white space: prose, help and error text
// are checked against the Specs by the doc tests) or in a case label of
// any kind: a harness is described once, in its Spec, and every other
// package derives from the list.
func TestNoHarnessNamesOutside(t *testing.T) {
	if len(harnessNames) == 0 {
		t.Fatal("no harness registered")
	}
	fset := token.NewFileSet()
	files := 0
	for _, dir := range derived {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			// testdata, and a package of test helpers that only tests
			// import (ninetest's seed conversations walk a fixture's
			// names), are not code that serves a harness.
			if d.IsDir() && (d.Name() == "testdata" || strings.HasSuffix(d.Name(), "test")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			inCase := map[*ast.BasicLit]bool{}
			ast.Inspect(f, func(n ast.Node) bool {
				if c, ok := n.(*ast.CaseClause); ok {
					for _, e := range c.List {
						ast.Inspect(e, func(n ast.Node) bool {
							if l, ok := n.(*ast.BasicLit); ok {
								inCase[l] = true
							}
							return true
						})
					}
				}
				l, ok := n.(*ast.BasicLit)
				if !ok || l.Kind != token.STRING {
					return true
				}
				v, err := strconv.Unquote(l.Value)
				if err != nil {
					return true
				}
				w := harnessWord(v)
				if w == "" || !inCase[l] && strings.IndexFunc(v, unicode.IsSpace) >= 0 {
					return true
				}
				where := "a string literal"
				if inCase[l] {
					where = "a case label"
				}
				t.Errorf("%s: harness %q named in %s %s: derive it from harness.Specs", fset.Position(l.Pos()), w, where, l.Value)
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Errorf("parsed %d files: the derived packages were not found", files)
	}
}
