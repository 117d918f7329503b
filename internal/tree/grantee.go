package tree

import (
	"sort"
	"strings"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/saferoot"
)

// slugDirs are, per harness, the directories of its root (rel paths) whose
// entries a harness names after a working directory. A slug there is judged
// by the credential table's store rules alone (see
// saferoot.SetSlugDirs), so an agent working in ~/src/oauth-server keeps its
// transcripts in the tree:
//
//	claude  projects/<-home-u-src-x>/<session>.jsonl
//	omp     agent/sessions/<-src-x or --home-u-src-x-->/<ts>_<id>.jsonl
//	pi      agent/sessions/<--home-u-src-x-->/<ts>_<id>.jsonl
//	dsh     sessions/<--home-u-src-x-->/session-<id>/session.jsonl.zstd
//	gemini  tmp/<x or x-1>/chats/session-<minute>-<id8>.jsonl
var slugDirs = map[string][]string{
	"claude": {"projects"},
	"omp":    {"agent/sessions"},
	"pi":     {"agent/sessions"},
	"dsh":    {"sessions"},
	"gemini": {"tmp"},
}

// copyStores are, per harness, the paths of its root (components may be
// "*") where it keeps copies of the files of the projects its agents work
// in: hidden from every view, as a credential is (saferoot.SetCopyStores),
// because a copy of a project's key is the key under another name.
//
//	hermes    checkpoints/<sha256(dir)[:16]>/ (a shadow git repository of
//	          each working directory: zlib objects of every file), also
//	          under each profile, profiles/<name>/checkpoints/
//	claude    file-history/<session>/<hash>@v<n> (each edited file, before)
//	gemini    history/<project hash>/ (shadow git repositories)
//	opencode  snapshot/ (git copies of the projects' files)
//
// /claude, /gemini and /opencode serve none of these directories anyway
// (layout.go mirrors only their sessions); the declaration holds for any
// path the layout may grow. Of the roots served whole: omp's
// sessions/<slug>/checkpoints/ hold only metadata (a tree hash, the names
// skipped), its objects live in the project's own repository; pi's rewind
// extensions keep theirs as refs of the project's repository too; dsh's
// own layout (sessions/, storages/, profiles/) holds none.
var copyStores = map[string][]string{
	"hermes":   {"checkpoints", "profiles/*/checkpoints"},
	"claude":   {"file-history"},
	"gemini":   {"history"},
	"opencode": {"snapshot"},
}

// The grantee view: what a peer that is not the owner (a uid granted with
// --allow-uid or --allow-group, or the owner's uid inside a sandbox) sees.
// Each harness's mirror is an allowlist of its session state; everything
// else in the root does not exist for that peer (absent from listings,
// NotExist on lookup). Beside the allowlists: /active (without the zmx,
// tmux and reach fields, which come from an agent's environment, nor the
// account's limits, and never writable),
// /pid and /uptime. Inside an allowed directory every name is still judged by
// the credential table, and a regular file with more than one link is never
// served (it may be a hardlink to a key the grantee may not read).
//
//	/claude   projects/ (transcripts), history (history.jsonl), skills/
//	/codex    sessions/ (rollouts), session-index, history
//	/omp      (agent/) sessions/, skills/
//	/pi       (agent/) sessions/, skills/
//	/hermes   sessions/, state.db (+ -wal, -shm: sessions and messages),
//	          runtime/active_sessions.json (the live session index), skills/
//	/dsh      sessions/, storages/workspace.json (the session index)
//	/gemini   tmp/ (the chats), projects (projects.json), as for the owner
//	/opencode storage/{session,message,part}/ (pre-1.2 sessions), as for the owner
//	/skills   claude/, codex/, omp/
//
// /claude and /codex are the same in both views: the owner's already mirrors
// only those. granteeAllow holds the rest: per harness, the paths beneath its
// mirrored directory.
var granteeAllow = map[string][]string{
	"omp":    {"sessions", "skills"},
	"pi":     {"sessions", "skills"},
	"hermes": {"sessions", "state.db", "state.db-wal", "state.db-shm", "runtime/active_sessions.json", "skills"},
	"dsh":    {"sessions", "storages/workspace.json"},
}

// allowDir is a host directory of which only allowed paths are visible:
// allow are rel paths beneath it, each either a child (served whole, as a
// grantee's mirror) or a deeper path (its first component is another
// allowDir).
type allowDir struct {
	root  *saferoot.Root
	rel   string
	allow []string
}

func newAllowDir(root *saferoot.Root, rel string, allow []string) (*allowDir, error) {
	info, err := root.Stat(rel)
	if err != nil {
		return nil, err
	}
	if !info.Dir {
		return nil, errs.E("tree.allow", errs.NotExist, rel, nil)
	}
	return &allowDir{root: root, rel: rel, allow: allow}, nil
}

// children maps each visible child name to the paths allowed beneath it
// (nil: the child itself is allowed whole).
func (d *allowDir) children() map[string][]string {
	out := map[string][]string{}
	for _, p := range d.allow {
		first, rest, deeper := strings.Cut(p, "/")
		if !deeper {
			out[first] = nil
			continue
		}
		if sub, ok := out[first]; ok && sub == nil {
			continue // already whole
		}
		out[first] = append(out[first], rest)
	}
	return out
}

func (d *allowDir) node(name string, sub []string) (Node, error) {
	rel := join1(d.rel, name)
	if err := d.root.CheckRel(rel); err != nil {
		return nil, err
	}
	if sub == nil {
		return mirrorAs(d.root, rel, wantAny, true)
	}
	return newAllowDir(d.root, rel, sub)
}

func (d *allowDir) Lookup(name string) (Node, error) {
	sub, ok := d.children()[name]
	if !ok || saferoot.ValidName(name) != nil {
		return nil, errs.E("tree.Lookup", errs.NotExist, join1(d.rel, name), nil)
	}
	return d.node(name, sub)
}

func (d *allowDir) List() ([]Entry, error) {
	var out []Entry
	for name, sub := range d.children() {
		n, err := d.node(name, sub)
		if err != nil {
			if absent(err) {
				continue
			}
			return nil, err
		}
		var a Attr
		if f, ok := n.(interface{ lookupAttr() Attr }); ok {
			a = f.lookupAttr()
		} else if a, err = n.Attr(); err != nil {
			if absent(err) {
				continue
			}
			return nil, err
		}
		out = append(out, Entry{Name: name, Dir: a.Dir, Path: a.Path})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (d *allowDir) Attr() (Attr, error) {
	info, err := d.root.Stat(d.rel)
	if err != nil {
		return Attr{}, err
	}
	if !info.Dir {
		return Attr{}, errs.E("tree.allow", errs.NotExist, d.rel, nil)
	}
	a := hostAttr(info)
	ents, err := d.List()
	if err != nil {
		return Attr{}, err
	}
	a.Nlink = 2
	for _, e := range ents {
		if e.Dir {
			a.Nlink++
		}
	}
	return a, nil
}
