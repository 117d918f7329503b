package tree

import (
	"fmt"
	"strconv"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/saferoot"
)

// Harnesses are the harnesses 9harness knows, in the order they are listed.
var Harnesses = harness.Names()

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
// cfg.Grantee a grantee's: see grantee.go). It tells each root where its
// working-directory slugs are (slugDirs) and where it keeps copies of
// project files (copyStores).
//
//	/active/<harness>/<pid>/...   (when cfg.Active is set)
//	/stale/<harness>/<id>/...     (when cfg.Active is set: stale.go)
//	/pid /uptime
//	/claude/{projects/,history,skills/}
//	/codex/{sessions/,session-index,history}
//	/omp/ /pi/ (each harness's agent directory) /hermes/ /dsh/ (whole roots)
//	/gemini/{tmp/,projects}
//	/opencode/storage/{session/,message/,part/}
//	/skills/{claude,codex,omp}/
func New(cfg Config) Dir {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	start := cfg.Start
	root := func(name string) *saferoot.Root { return cfg.Roots[name] }
	for h, dirs := range slugDirs {
		if r := root(h); r != nil {
			r.SetSlugDirs(dirs...)
		}
	}
	for h, paths := range copyStores {
		if r := root(h); r != nil {
			r.SetCopyStores(paths...)
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
			return newAllowDir(r, rel, granteeAllow[harness])
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
	skills := NewStatic("/skills", start,
		at("claude", "claude", "skills", wantDir),
		at("codex", "codex", "skills", wantDir),
		at("omp", "omp", "agent/skills", wantDir),
	)
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
	return NewStatic("/", start, append(children,
		Child{Name: "pid", Make: fixed(pid)},
		Child{Name: "uptime", Make: fixed(uptime)},
		dir("claude", "claude",
			at("projects", "claude", "projects", wantDir),
			at("history", "claude", "history.jsonl", wantFile),
			at("skills", "claude", "skills", wantDir),
		),
		dir("codex", "codex",
			at("sessions", "codex", "sessions", wantDir),
			at("session-index", "codex", "session_index.jsonl", wantFile),
			at("history", "codex", "history.jsonl", wantFile),
		),
		whole("omp", "omp", "agent"),
		whole("pi", "pi", "agent"),
		whole("hermes", "hermes", ""),
		whole("dsh", "dsh", ""),
		// Gemini CLI: the chats (tmp/<slug>/chats/…) and the slug map;
		// never the root whole (oauth_creds.json, settings.json, the
		// history/ shadow git repos of the projects' files).
		dir("gemini", "gemini",
			at("tmp", "gemini", "tmp", wantDir),
			at("projects", "gemini", "projects.json", wantFile),
		),
		// opencode: only the JSON sessions and messages of its pre-1.2
		// storage/ tree. Its sessions now live in opencode.db, which
		// also holds the account's tokens: the credential table hides
		// it, and /active serves only what is derived from it. Never
		// the root whole (auth.json, snapshot/ git copies of the
		// projects' files, storage/session_share/ share secrets).
		dir("opencode", "opencode",
			Child{Name: "storage", Make: fixed(NewStatic("/opencode/storage", start,
				at("session", "opencode", "storage/session", wantDir),
				at("message", "opencode", "storage/message", wantDir),
				at("part", "opencode", "storage/part", wantDir),
			))},
		),
		Child{Name: "skills", Make: fixed(skills)},
	)...)
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
