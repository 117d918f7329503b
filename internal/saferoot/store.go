package saferoot

// storeNames are the credential-bearing stores that a harness reads itself
// to derive the facts /active serves (a session's id, title and model),
// and that nothing else ever opens: the credential table hides them from
// every listing and every read of the tree. opencode keeps its sessions
// and its account tokens in one SQLite file, so the file can never be
// served, yet it is the only record of which session an opencode works on.
var storeNames = []string{"opencode.db"}

// Store returns a view of r that also stats and opens the stores named in
// storeNames, and their SQLite companions (-wal, -shm, -journal), at r's
// top level and nowhere else. Every other name, and everything beneath a
// directory, is judged by the whole credential table, as r judges it; a
// listing still hides the stores. The view is for a harness's own reads
// (internal/harness): it is never handed to the tree, so no peer can name
// a store through it. It shares r's pinning (anchor, mount) and takes no
// slug directories.
func (r *Root) Store() *Root {
	return &Root{path: r.path, noOat2: r.noOat2, xdev: r.xdev, anchor: r.anchor, name: r.name, mnt: r.mnt, dead: r.dead, store: true}
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
