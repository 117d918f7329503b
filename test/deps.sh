#!/bin/sh
# Installs the Debian packages the tests need, when they are missing.
# diod: diodls/diodcat/diodload, an independent 9P2000.L client nobody here wrote.
# zstd: the tests decode fixtures with the real tool. tmux: the move's
# real host. nix-bin: the offline Nix checks. groff-base: groff, the man pages render
# clean (groff -ww). zsh, fish: the shell completions load in the shells
# they are for. dbus, libnotify-bin: contrib/notify-waiting's notify-send
# against a stub notification service on a private bus. As root also
# systemd, polkitd and openssh-server for the system tests.
set -eu
PATH=$PATH:/usr/sbin:/sbin
missing=""
command -v diodls >/dev/null 2>&1 || missing="$missing diod"
command -v zstd >/dev/null 2>&1 || missing="$missing zstd"
# The system tests (root only): a real journald, system bus and polkitd.
if [ "$(id -u)" = 0 ]; then
	[ -x /usr/lib/systemd/systemd-journald ] || missing="$missing systemd"
	[ -x /usr/lib/polkit-1/polkitd ] || missing="$missing polkitd"
	[ -x /usr/sbin/sshd ] || missing="$missing openssh-server"
fi
command -v tmux >/dev/null 2>&1 || missing="$missing tmux"
command -v fzf >/dev/null 2>&1 || missing="$missing fzf"
command -v fusermount3 >/dev/null 2>&1 || missing="$missing fuse3"
command -v nix-instantiate >/dev/null 2>&1 || missing="$missing nix-bin"
command -v groff >/dev/null 2>&1 || missing="$missing groff-base"
command -v zsh >/dev/null 2>&1 || missing="$missing zsh"
command -v fish >/dev/null 2>&1 || missing="$missing fish"
command -v dbus-daemon >/dev/null 2>&1 || missing="$missing dbus"
command -v notify-send >/dev/null 2>&1 || missing="$missing libnotify-bin"
# The real-CLI tier installs the agent CLIs from npm (test/realcli).
command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: please install:$missing" >&2
	exit 1
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "deps: installing$missing" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-upgrade --no-install-recommends $missing
