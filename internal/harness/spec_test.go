package harness

import (
	"slices"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// TestSpecs: every registered Spec is whole and consistent, so a harness
// added as one file cannot leave the tree, the credential table, the proc
// helper or the docs half told: its mirrors are valid paths of its root
// and not themselves hidden, a grantee allowlist goes only with a mirror
// served whole, its credential stores and its own stores are hidden by
// the one table, its variables are Wanted, and its Doc has every column.
func TestSpecs(t *testing.T) {
	specs := Specs()
	if len(specs) == 0 || len(specs) != len(all) {
		t.Fatalf("%d specs for %d harnesses", len(specs), len(all))
	}
	if !slices.IsSortedFunc(specs, func(a, b Spec) int { return a.Order - b.Order }) {
		t.Error("Specs are not in Order")
	}
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			if got := ByName(s.Name); got == nil || got.Name() != s.Name {
				t.Errorf("ByName(%q) does not return it", s.Name)
			}
			if len(s.Mirrors) == 0 {
				t.Error("no mirrors: /NAME/ would be empty")
			}
			whole := len(s.Mirrors) == 1 && s.Mirrors[0].At == ""
			for _, m := range s.Mirrors {
				if m.At == "" && !whole {
					t.Errorf("a whole mirror beside others: %+v", m)
				}
				if m.Rel != "" && saferoot.CheckRel(m.Rel) != nil {
					t.Errorf("mirror %+v: Rel is not a path the table lets through: %v", m, saferoot.CheckRel(m.Rel))
				}
				if m.At != "" && strings.Trim(m.At, "/") != m.At {
					t.Errorf("mirror %+v: At is not a clean path", m)
				}
			}
			if !whole && s.Grantee != nil {
				t.Error("Grantee without a whole mirror: a grantee sees the named mirrors already")
			}
			for _, p := range s.Grantee {
				if saferoot.CheckRel(p) != nil {
					t.Errorf("grantee path %q is hidden or invalid", p)
				}
			}
			if s.Skills != "" && saferoot.CheckRel(s.Skills) != nil {
				t.Errorf("skills dir %q is hidden or invalid", s.Skills)
			}
			for _, c := range s.Credentials {
				if n := strings.ReplaceAll(c.Pattern, "*", "x"); !saferoot.Excluded(n) || !saferoot.ExcludedSlug(n) {
					t.Errorf("credential store %q (%s) is not a store rule of the table", c.Pattern, c.From)
				}
			}
			for _, n := range s.Stores {
				if !saferoot.Excluded(n) {
					t.Errorf("store %q is not hidden by the credential table", n)
				}
			}
			for _, v := range s.Env {
				if !proc.IsWanted(v) {
					t.Errorf("variable %s is not Wanted", v)
				}
			}
			if s.Summed && s.Counter == nil {
				t.Error("Summed without a Counter")
			}
			d := s.Doc
			for col, v := range map[string]string{"Title": d.Title, "Root": d.Root, "Process": d.Process, "Via": d.Via, "Resume": d.Resume, "RealCLI": d.RealCLI} {
				if v == "" || strings.Contains(v, "|") || strings.Contains(v, "\n") {
					t.Errorf("Doc.%s %q: empty, or not one table cell", col, v)
				}
			}
			if s.Verified != "" && !strings.HasPrefix(d.RealCLI, s.Verified) {
				t.Errorf("Doc.RealCLI %q does not give the version Verified, %s", d.RealCLI, s.Verified)
			}
		})
	}
}
