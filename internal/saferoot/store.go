package saferoot

import (
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"
)

// storeNames are the credential-bearing stores that a harness reads itself
// to derive the facts /active serves (a session's id, title and model),
// and that nothing else ever opens: the credential table hides them from
// every listing and every read of the tree. A harness that keeps its
// sessions and its account tokens in one file declares it (AddStores).
var storeNames []string

// AddStores adds names to the stores the Store view may open. Like
// AddStoreRules it is for package initialization.
func AddStores(names ...string) {
	for _, n := range names {
		if n == "" || strings.ContainsRune(n, '/') {
			panic("saferoot: bad store " + n)
		}
		if !slices.Contains(storeNames, n) {
			storeNames = append(storeNames, n)
		}
	}
}

// Store returns a view of r that also stats and opens the stores named in
// storeNames, and their SQLite companions (-wal, -shm, -journal), at r's
// top level and nowhere else. Every other name, and everything beneath a
// directory, is judged by the whole credential table, as r judges it; a
// listing still hides the stores. The view is for a harness's own reads
// (internal/harness): it is never handed to the tree, so no peer can name
// a store through it. It shares r's pinning (anchor, mount) and takes no
// slug directories; its copy stores stay hidden.
func (r *Root) Store() *Root {
	v := &Root{path: r.path, noOat2: r.noOat2, xdev: r.xdev, anchor: r.anchor, name: r.name, mnt: r.mnt, dead: r.dead, store: true}
	v.copies.Store(r.copies.Load())
	return v
}

// storeLeaf reports whether rel is a store (or a companion of one) that
// the Store view r may open.
func (r *Root) storeLeaf(rel string) bool {
	if r == nil || !r.store {
		return false
	}
	for _, n := range storeNames {
		switch rel {
		case n, n + "-wal", n + "-shm", n + "-journal":
			return true
		}
	}
	return false
}

// Copy stores. Some harnesses keep copies of the files of the projects
// their agents work in: hermes's checkpoints/ (a shadow git repository per
// working directory, zlib objects of every file, keys included), Claude's
// file-history/, Gemini's history/, opencode's snapshot/. A copy of a
// project's deploy.key is the key under another name (its object hash), so
// the credential table, which judges names, cannot catch it: the whole
// store is hidden instead, as a credential is, from every listing, walk,
// stat and open of the tree and of a harness's reads. A Root is told where
// its stores are by SetCopyStores, each a rel path whose components are
// names or "*" (any one name): "checkpoints", "profiles/*/checkpoints".
type copyStores = atomic.Pointer[[]string]

// SetCopyStores tells r which of its paths are stores of copies of project
// files. It is safe to call while r is in use; the last call wins.
func (r *Root) SetCopyStores(paths ...string) {
	for _, p := range paths {
		if p == "" || strings.HasSuffix(p, "/*") || p == "*" || checkPattern(p) != nil {
			panic("saferoot: bad copy store " + p)
		}
	}
	d := append([]string(nil), paths...)
	r.copies.Store(&d)
}

func checkPattern(p string) error {
	return checkRelAt("saferoot.SetCopyStores", strings.ReplaceAll(p, "*", "x"), nil)
}

// inCopyStore reports whether rel is a copy store or beneath one.
func (r *Root) inCopyStore(rel string) bool {
	p := r.copies.Load()
	if p == nil || rel == "" {
		return false
	}
	for _, pat := range *p {
		if prefixMatch(pat, rel) {
			return true
		}
	}
	return false
}

// prefixMatch reports whether the components of pat match the first
// components of rel ("*" matching any one), names compared as the
// credential table compares them (folded).
func prefixMatch(pat, rel string) bool {
	for {
		pc, prest, pmore := strings.Cut(pat, "/")
		rc, rrest, rmore := strings.Cut(rel, "/")
		if pc != "*" && !sameName(pc, rc) {
			return false
		}
		if !pmore {
			return true
		}
		if !rmore {
			return false
		}
		pat, rel = prest, rrest
	}
}

// copyChildren returns the names of the copy stores whose parent is the
// directory rel: what a listing of rel drops.
func (r *Root) copyChildren(rel string) []string {
	p := r.copies.Load()
	if p == nil {
		return nil
	}
	var out []string
	for _, pat := range *p {
		dir, name := "", pat
		if i := strings.LastIndexByte(pat, '/'); i >= 0 {
			dir, name = pat[:i], pat[i+1:]
		}
		if dir == "" && rel == "" || dir != "" && rel != "" && prefixMatch(dir, rel) && strings.Count(dir, "/") == strings.Count(rel, "/") {
			out = append(out, name)
		}
	}
	return out
}

// sameName compares two names as a casefolding directory would (fold).
func sameName(a, b string) bool {
	if len(a) > maxName || len(b) > maxName {
		return a == b
	}
	var ba, bb [maxName + 1]byte
	return string(fold(ba[:0], a)) == string(fold(bb[:0], b))
}

// hiddenCopy reports whether the entry name of a listing is one of hide.
// The string made of name does not outlive the call, and the buffer is not
// written during it.
func hiddenCopy(hide []string, name []byte) bool {
	if len(name) == 0 || len(name) > maxName {
		return false
	}
	n := unsafe.String(unsafe.SliceData(name), len(name))
	for _, h := range hide {
		if sameName(h, n) {
			return true
		}
	}
	return false
}
