package tree

import (
	"sort"
	"strings"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/saferoot"
)

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
// A harness whose Spec mirrors named paths of its root shows a grantee
// the same as the owner: those paths are already its session state. A
// harness whose mirror is a directory served whole shows a grantee its
// Spec's Grantee paths beneath it, and nothing else.

// granteeAllow is the allowlist of the harness called name: the paths
// beneath its mirrored directory a grantee sees.
func granteeAllow(name string) []string {
	s, _ := harness.SpecOf(name)
	return s.Grantee
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
