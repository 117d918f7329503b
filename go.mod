module github.com/9harness/9harness

go 1.26.0

require (
	9fans.net/go v0.0.8-0.20250307142834-96bdba94b63f
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/godbus/dbus/v5 v5.2.4
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/hugelgupf/p9 v0.4.1
	github.com/klauspost/compress v1.20.4
	golang.org/x/sys v0.50.0
)

require github.com/u-root/uio v0.0.0-20230305220412-3e8cd9d6bf63 // indirect
