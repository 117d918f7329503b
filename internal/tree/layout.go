package tree

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/saferoot"
)

// Harnesses are the harnesses 9harness knows, in the order they are listed.
var Harnesses = harness.Names()

// specs are their Specs: what the tree serves of each root, the grantee's
// view, the slug directories and copy stores each root is told of.
var specs = harness.Specs()

// Config is what the tree is built from.
type Config struct {
	// Roots maps a harness name to its root, anchored by saferoot (only the
	// directory holding it is held open; the root is opened from there, with
	// no link followed, by every operation). A harness with no entry
	// has no mirrors; one whose directory is missing has none until it appears.
	Roots map[string]*saferoot.Root
	PID   int
	Start time.Time
	Now   func() time.Time // nil means time.Now
	// Active, if set, adds /active: one directory per live agent.
	Active *ActiveConfig
	// Grantee builds the view of a peer that is not the owner: session
	// state only (see granteeAllow in grantee.go), no hardlinked file, no
	// environment-derived fact, nothing writable.
	Grantee bool
}

// New builds the root directory of the tree (the owner's view, or with
// cfg.Grantee a grantee's: see grantee.go), from the harnesses' Specs. It
// tells each root where its working-directory slugs are (Spec.SlugDirs)
// and where it keeps copies of project files (Spec.CopyStores).
//
//	/active/<harness>/<pid>/...   (when cfg.Active is set)
//	/stale/<harness>/<id>/...     (when cfg.Active is set: stale.go)
//	/pid /uptime
//	/<harness>/...                each Spec's Mirrors, in the Specs' order
//	/skills/<harness>/            each Spec's Skills
func New(cfg Config) Dir {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	start := cfg.Start
	root := func(name string) *saferoot.Root { return cfg.Roots[name] }
	for _, sp := range specs {
		if r := root(sp.Name); r != nil {
			if len(sp.SlugDirs) > 0 {
				r.SetSlugDirs(sp.SlugDirs...)
			}
			if len(sp.CopyStores) > 0 {
				r.SetCopyStores(sp.CopyStores...)
			}
		}
	}

	// at is a child that mirrors rel under a harness root.
	at := func(name, harness, rel string, w want) Child {
		return Child{Name: name, Make: func() (Node, error) {
			r := root(harness)
			if r == nil {
				return nil, errs.E("tree.Lookup", errs.NotExist, "/"+name, nil)
			}
			return mirrorAs(r, rel, w, cfg.Grantee)
		}}
	}
	// whole is a harness directory the owner sees whole and a grantee
	// through its allowlist.
	whole := func(name, harness, rel string) Child {
		if !cfg.Grantee {
			return at(name, harness, rel, wantDir)
		}
		return Child{Name: name, Make: func() (Node, error) {
			r := root(harness)
			if r == nil {
				return nil, errs.E("tree.Lookup", errs.NotExist, "/"+name, nil)
			}
			return newAllowDir(r, rel, granteeAllow(harness))
		}}
	}
	// dir is a static directory that exists only while the harness root does.
	dir := func(name, harness string, children ...Child) Child {
		d := NewStatic("/"+name, start, children...)
		return Child{Name: name, Make: func() (Node, error) {
			if r := root(harness); r == nil || !r.Exists() {
				return nil, errs.E("tree.Lookup", errs.NotExist, "/"+name, nil)
			}
			return d, nil
		}}
	}
	fixed := func(n Node) func() (Node, error) { return func() (Node, error) { return n, nil } }

	pid := NewGen("/pid", func() time.Time { return start }, func() []byte {
		return []byte(strconv.Itoa(cfg.PID) + "\n")
	})
	uptime := NewGen("/uptime", now, func() []byte {
		return fmt.Appendf(nil, "%d\n", int64(now().Sub(start)/time.Second))
	})
	var skillDirs []Child
	for _, sp := range specs {
		if sp.Skills != "" {
			skillDirs = append(skillDirs, at(sp.Name, sp.Name, sp.Skills, wantDir))
		}
	}
	skills := NewStatic("/skills", start, skillDirs...)
	children := []Child{}
	if cfg.Active != nil {
		ac := *cfg.Active
		if ac.Now == nil {
			ac.Now = now
		}
		if cfg.Grantee {
			ac.grantee, ac.Mover = true, nil
		}
		act := newActive(ac, start)
		children = append(children, Child{Name: "active", Make: fixed(act.root()), Slow: true},
			Child{Name: "stale", Make: fixed(&stale{act}), Slow: true})
	}
	children = append(children,
		Child{Name: "pid", Make: fixed(pid)},
		Child{Name: "uptime", Make: fixed(uptime)},
	)
	// mirrors makes the children of the directory prefix (a path beneath
	// /NAME/, "" for /NAME/ itself) from the harness's mirrors beneath it:
	// a mirror whose At is the next component, or a static directory of
	// the deeper ones, in the order the spec lists them.
	var mirrors func(sp harness.Spec, prefix string) []Child
	mirrors = func(sp harness.Spec, prefix string) []Child {
		var out []Child
		seen := map[string]bool{}
		for _, m := range sp.Mirrors {
			rest, ok := strings.CutPrefix(m.At, prefix)
			if !ok || rest == "" {
				continue
			}
			first, _, deeper := strings.Cut(rest, "/")
			if seen[first] {
				continue
			}
			seen[first] = true
			if !deeper {
				w := wantDir
				if m.File {
					w = wantFile
				}
				out = append(out, at(first, sp.Name, m.Rel, w))
				continue
			}
			d := NewStatic("/"+sp.Name+"/"+prefix+first, start, mirrors(sp, prefix+first+"/")...)
			out = append(out, Child{Name: first, Make: fixed(d)})
		}
		return out
	}
	for _, sp := range specs {
		if len(sp.Mirrors) == 1 && sp.Mirrors[0].At == "" {
			children = append(children, whole(sp.Name, sp.Name, sp.Mirrors[0].Rel))
			continue
		}
		children = append(children, dir(sp.Name, sp.Name, mirrors(sp, "")...))
	}
	return NewStatic("/", start, append(children, Child{Name: "skills", Make: fixed(skills)})...)
}

// DefaultRoots returns each harness's default root under home
// (harness.DefaultRoot).
func DefaultRoots(home, xdgDataHome string) map[string]string {
	m := make(map[string]string, len(Harnesses))
	for _, h := range Harnesses {
		m[h] = harness.DefaultRoot(h, home, xdgDataHome)
	}
	return m
}
