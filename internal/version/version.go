// Package version names the build a binary came from.
package version

import "runtime/debug"

// String returns linked (set with -ldflags "-X main.version=...") when it
// was set, else what the Go toolchain recorded in the binary: the module
// version of a `go install pkg@v`, or the VCS revision of a build from a
// checkout (with "-dirty" when the tree had changes), so a plain `go build`
// still says which code it is.
func String(linked string) string {
	if linked != "" && linked != "dev" {
		return linked
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return rev + dirty
}
