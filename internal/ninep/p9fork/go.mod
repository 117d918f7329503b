module github.com/hugelgupf/p9

go 1.21

toolchain go1.21.0

require (
	github.com/hugelgupf/socketpair v0.0.0-20230822150718-707395b1939a
	github.com/u-root/uio v0.0.0-20230305220412-3e8cd9d6bf63
	golang.org/x/sys v0.15.0
)
