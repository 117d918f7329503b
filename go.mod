module github.com/9harness/9harness

go 1.26.0

require (
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/hugelgupf/p9 v0.4.1 // indirect
	github.com/u-root/uio v0.0.0-20230305220412-3e8cd9d6bf63 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
