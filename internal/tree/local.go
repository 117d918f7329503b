package tree

import "sort"

// Local reports whether n, and each node a walk of names from n reaches,
// answers from the host file system and memory alone: a few system calls
// on the mirrored files, or a value in memory, and never a scan of the
// process table, a wait for an event or a move. A server may answer such a
// request without handing it to a goroutine of its own.
//
// The mirrors (the owner's and a grantee's), the static directories and
// the generated files are; /active and everything below it is not.
func Local(n Node, names []string) bool {
	switch n := n.(type) {
	case *mirrorDir, *mirrorFile, *allowDir, *Gen:
		return true
	case *Static:
		return len(names) == 0 || !n.slow(names[0])
	}
	return false
}

// slow reports whether d's child name is marked Slow.
func (d *Static) slow(name string) bool {
	i := sort.Search(len(d.children), func(i int) bool { return d.children[i].Name >= name })
	return i < len(d.children) && d.children[i].Name == name && d.children[i].Slow
}
