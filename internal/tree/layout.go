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
	l := layout{cfg: cfg}
	l.tellRoots()

	pid := NewGen("/pid", func() time.Time { return start }, func() []byte {
		return []byte(strconv.Itoa(cfg.PID) + "\n")
	})
	uptime := NewGen("/uptime", now, func() []byte {
		return fmt.Appendf(nil, "%d\n", int64(now().Sub(start)/time.Second))
	})
	var skillDirs []Child
	for _, sp := range specs {
		if sp.Skills != "" {
			skillDirs = append(skillDirs, l.mirror(sp.Name, sp.Name, sp.Skills, wantDir))
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
	for _, sp := range specs {
		if len(sp.Mirrors) == 1 && sp.Mirrors[0].At == "" {
			children = append(children, l.whole(sp.Name, sp.Name, sp.Mirrors[0].Rel))
			continue
		}
		children = append(children, l.harnessDir(sp.Name, sp.Name, l.mirrors(sp, "")...))
	}
	return NewStatic("/", start, append(children, Child{Name: "skills", Make: fixed(skills)})...)
}

// fixed makes a child's Make that always gives n.
func fixed(n Node) func() (Node, error) { return func() (Node, error) { return n, nil } }

// layout makes the children of New's tree that stand for harness roots,
// each looking its root up when it is walked.
type layout struct{ cfg Config }

func (l layout) root(name string) *saferoot.Root { return l.cfg.Roots[name] }

// tellRoots tells each root where its working-directory slugs are
// (Spec.SlugDirs) and where it keeps copies of project files
// (Spec.CopyStores).
func (l layout) tellRoots() {
	for _, sp := range specs {
		if r := l.root(sp.Name); r != nil {
			if len(sp.SlugDirs) > 0 {
				r.SetSlugDirs(sp.SlugDirs...)
			}
			if len(sp.CopyStores) > 0 {
				r.SetCopyStores(sp.CopyStores...)
			}
		}
	}
}

// mirror is a child that mirrors rel under a harness root.
func (l layout) mirror(name, harness, rel string, w want) Child {
	return Child{Name: name, Make: func() (Node, error) {
		r := l.root(harness)
		if r == nil {
			return nil, errs.E("tree.Lookup", errs.NotExist, "/"+name, nil)
		}
		return mirrorAs(r, rel, w, l.cfg.Grantee)
	}}
}

// whole is a harness directory the owner sees whole and a grantee
// through its allowlist.
func (l layout) whole(name, harness, rel string) Child {
	if !l.cfg.Grantee {
		return l.mirror(name, harness, rel, wantDir)
	}
	return Child{Name: name, Make: func() (Node, error) {
		r := l.root(harness)
		if r == nil {
			return nil, errs.E("tree.Lookup", errs.NotExist, "/"+name, nil)
		}
		return newAllowDir(r, rel, granteeAllow(harness))
	}}
}

// harnessDir is a static directory that exists only while the harness
// root does.
func (l layout) harnessDir(name, harness string, children ...Child) Child {
	d := NewStatic("/"+name, l.cfg.Start, children...)
	return Child{Name: name, Make: func() (Node, error) {
		if r := l.root(harness); r == nil || !r.Exists() {
			return nil, errs.E("tree.Lookup", errs.NotExist, "/"+name, nil)
		}
		return d, nil
	}}
}

// mirrors makes the children of the directory prefix (a path beneath
// /NAME/, "" for /NAME/ itself) from the harness's mirrors beneath it:
// a mirror whose At is the next component, or a static directory of
// the deeper ones, in the order the spec lists them.
func (l layout) mirrors(sp harness.Spec, prefix string) []Child {
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
			out = append(out, l.mirror(first, sp.Name, m.Rel, w))
			continue
		}
		d := NewStatic("/"+sp.Name+"/"+prefix+first, l.cfg.Start, l.mirrors(sp, prefix+first+"/")...)
		out = append(out, Child{Name: first, Make: fixed(d)})
	}
	return out
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
