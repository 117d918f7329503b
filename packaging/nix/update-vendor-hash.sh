#!/usr/bin/env bash
# Keeps vendorHash in packaging/nix/package.nix in step with go.mod/go.sum.
#
#   packaging/nix/update-vendor-hash.sh           rewrite vendorHash in package.nix
#   packaging/nix/update-vendor-hash.sh --check   exit 1 if it is stale (test/nix_test.go runs this)
#   packaging/nix/update-vendor-hash.sh --print   print the hash only
#
# buildGoModule's vendorHash is the NAR hash (sha256, SRI) of the output of
# its go-modules derivation, which is exactly `go mod vendor`'s vendor/
# directory (nixpkgs pkgs/build-support/go/module.nix; no proxyVendor). So
# it is computed here with the local Go and Nix's own NAR hasher, without
# building anything: `nix hash path` (Nix >= 2.4) or `nix-hash`. It needs
# the module sources (the Go module cache or the Go proxy).
#
# Without Nix on the machine, the other way is nixpkgs' documented one: set
#   vendorHash = lib.fakeHash;
# build once (nix build 'git+file://'"$PWD"'?dir=packaging/nix'), and copy
# the hash the failure prints after "got:" into package.nix.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pkg=$here/package.nix
mode=${1:-write}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# As nixpkgs runs it: no GOFLAGS, no workspace.
(cd "$root" && GOFLAGS= GOWORK=off go mod vendor -o "$tmp/vendor")

if command -v nix >/dev/null 2>&1; then
	hash=$(nix --extra-experimental-features nix-command --store dummy:// \
		hash path --type sha256 --sri "$tmp/vendor")
elif command -v nix-hash >/dev/null 2>&1; then
	hex=$(nix-hash --type sha256 "$tmp/vendor")
	# hex -> bytes (bash's printf) -> base64: the SRI form.
	hash=sha256-$(printf "$(printf '%s' "$hex" | sed 's/../\\x&/g')" | base64 -w0)
else
	echo "update-vendor-hash: neither nix nor nix-hash is installed." >&2
	echo "Set vendorHash = lib.fakeHash; in $pkg, build once, and copy the \"got:\" hash." >&2
	exit 2
fi

current=$(sed -n 's/^ *vendorHash = "\(.*\)";.*/\1/p' "$pkg")
case $mode in
--print)
	echo "$hash"
	;;
--check)
	if [ "$current" != "$hash" ]; then
		echo "vendorHash in $pkg is $current; go.mod/go.sum give $hash." >&2
		echo "Run packaging/nix/update-vendor-hash.sh" >&2
		exit 1
	fi
	;;
write)
	if [ "$current" = "$hash" ]; then
		echo "vendorHash is current: $hash"
	else
		sed -i "s|^\( *vendorHash = \)\".*\";|\1\"$hash\";|" "$pkg"
		echo "vendorHash: $current -> $hash"
	fi
	;;
*)
	echo "usage: $0 [--check|--print]" >&2
	exit 2
	;;
esac
