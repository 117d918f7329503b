module github.com/hugelgupf/p9

go 1.21

toolchain go1.21.0

require (
	github.com/hugelgupf/socketpair v0.0.0-20230822150718-707395b1939a
	github.com/hugelgupf/vmtest v0.0.0-20240115033909-46506b2af5ea
	github.com/u-root/u-root v0.12.1-0.20240114161452-ab3534910ced
	github.com/u-root/uio v0.0.0-20230305220412-3e8cd9d6bf63
	golang.org/x/exp v0.0.0-20231219180239-dc181d75b848
	golang.org/x/sys v0.15.0
)

require (
	github.com/Netflix/go-expect v0.0.0-20220104043353-73e0943537d2 // indirect
	github.com/creack/pty v1.1.21 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/google/goterm v0.0.0-20200907032337-555d40f16ae2 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/insomniacslk/dhcp v0.0.0-20231206064809-8c70d406f6d2 // indirect
	github.com/josharian/native v1.1.0 // indirect
	github.com/klauspost/compress v1.17.4 // indirect
	github.com/klauspost/pgzip v1.2.6 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/mdlayher/packet v1.1.2 // indirect
	github.com/mdlayher/socket v0.5.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.18 // indirect
	github.com/spf13/pflag v1.0.5 // indirect
	github.com/u-root/gobusybox/src v0.0.0-20231228173702-b69f654846aa // indirect
	github.com/ulikunitz/xz v0.5.11 // indirect
	github.com/vishvananda/netlink v1.2.1-beta.2 // indirect
	github.com/vishvananda/netns v0.0.4 // indirect
	golang.org/x/mod v0.14.0 // indirect
	golang.org/x/net v0.19.0 // indirect
	golang.org/x/sync v0.5.0 // indirect
	golang.org/x/tools v0.16.1 // indirect
	src.elv.sh v0.16.0-rc1.0.20220116211855-fda62502ad7f // indirect
)
