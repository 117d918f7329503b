module github.com/9harness/9harness

go 1.26.0

require (
	9fans.net/go v0.0.8-0.20250307142834-96bdba94b63f
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/godbus/dbus/v5 v5.2.4
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/hugelgupf/p9 v0.4.1
	github.com/klauspost/compress v1.20.4
	github.com/ncruces/go-sqlite3 v0.37.0
	github.com/rivo/uniseg v0.4.7
	github.com/spf13/pflag v1.1.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/ncruces/go-sqlite3-wasm/v6 v6.5.35401 // indirect
	github.com/ncruces/julianday v1.0.0 // indirect
	github.com/u-root/uio v0.0.0-20230305220412-3e8cd9d6bf63 // indirect
)

// The 9P2000.L engine, patched in the repository (internal/ninep/p9fork/PATCHES).
replace github.com/hugelgupf/p9 => ./internal/ninep/p9fork

// The 9P2000 engine (srv9p and its plan9 package), patched in the
// repository (internal/ninep/srv9pfork/PATCHES).
replace 9fans.net/go => ./internal/ninep/srv9pfork
