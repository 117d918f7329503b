# 9harness. `make run` serves your own harness directories read-only;
# `make test` installs what the tests need (once) and runs every test.

GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin

.PHONY: all build run test deps vet bench clean install install-files uninstall install-user uninstall-user torture torture-ci realcli-latest dist redteam

all: build

# The client is linked statically (CGO_ENABLED=0): it looks up no user
# names, so it needs nothing of libc, and a run that loads no libc starts
# about 5 ms sooner, which `9harness ps` and every ssh relay pay. The
# daemon keeps cgo, so that --allow-uid and --allow-group names resolve
# through NSS as the system's own tools resolve them.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/9harnessd
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/9harness

# The daemon on your own home, in the foreground, read-only. It prints the
# socket path and the command that lists the tree.
run: build
	$(BIN)/9harnessd

# Debian packages the tests use as independent peers (diod's clients) and
# fixture tools (zstd). Installed only when missing.
deps:
	@sh test/deps.sh

vet:
	$(GO) vet ./...
	$(GO) vet -tags redteam ./test/redteam/
	cd internal/ninep/p9fork && $(GO) vet ./p9/
	cd internal/ninep/srv9pfork && $(GO) vet ./...
	@out=$$(gofmt -l cmd internal test); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# make test runs three streams at once, each against its own budget on a
# warm 2-vCPU machine (the -timeout is a stop for a hung test, well above
# the budget, not a target):
# - test/, the integration and system tests (budget 10 min): the longest,
#   so it starts first rather than after the unit packages;
# - test/realcli, the real-CLI tier (budget 5 min), beside it;
# - every other package, then the p9 and srv9p forks, modules of their own
#   that ./... does not enter (budget 5 min).
# Each stream's report is printed whole when the stream ends, so reports
# never interleave; the target fails if any stream failed. Most of test/'s
# parallel tests wait (on ssh, polls, a quiet span) rather than compute,
# so it runs four at once (go test's default is GOMAXPROCS, two here).
TESTFLAGS ?= -race -count=1
TESTPARALLEL ?= 4
test: deps vet
	@logs=$$(mktemp -d); trap 'rm -rf "$$logs"' EXIT; \
	echo "make test: test/, test/realcli and the other packages run at once; each report follows when it ends"; \
	$(GO) test $(TESTFLAGS) -parallel $(TESTPARALLEL) -timeout 40m ./test/ >$$logs/test 2>&1 & slow=$$!; \
	$(GO) test $(TESTFLAGS) -timeout 20m ./test/realcli/ >$$logs/realcli 2>&1 & realcli=$$!; \
	{ rc=0; \
	  $(GO) test $(TESTFLAGS) -timeout 20m $$($(GO) list ./... | grep -v -e '/test$$' -e '/test/realcli$$') || rc=1; \
	  (cd internal/ninep/p9fork && $(GO) test $(TESTFLAGS) ./p9/) || rc=1; \
	  (cd internal/ninep/srv9pfork && $(GO) test $(TESTFLAGS) ./...) || rc=1; \
	  exit $$rc; } >$$logs/unit 2>&1 & unit=$$!; \
	rc=0; \
	for s in unit:$$unit realcli:$$realcli test:$$slow; do \
		name=$${s%%:*}; \
		if wait $${s#*:}; then echo "== $$name: ok"; else rc=1; echo "== $$name: FAILED"; fi; \
		cat $$logs/$$name; \
	done; \
	exit $$rc

# The standing adversarial tier (test/redteam; RELIABILITY.md, "Under
# attack"): one attacker per way a peer has made the daemon take memory,
# lock the owner out, or get more than the kernel gives it, each against
# the daemon built from the tree inside a 512 MiB memory cgroup (the
# unit's MemoryMax). It checks the daemon's VmHWM, OOM kills and the
# owner's ls / under each, and prints the table RELIABILITY.md quotes,
# pass or fail. Needs root. Not part of make test (build tag redteam), and
# without -race, whose shadow memory would blur the figures.
redteam:
	@out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	REDTEAM_SUMMARY=$$out $(GO) test -tags redteam -count=1 -timeout 6m ./test/redteam/; rc=$$?; \
	cat $$out; exit $$rc

# The real-CLI tier (test/realcli, part of make test) against the newest
# published Claude Code, Codex and pi instead of the pinned ones: the
# summary at the end names every /active fact that differs from what they
# wrote, so a format change is seen before a user sees it.
realcli-latest:
	REALCLI_VERSIONS=latest $(GO) test -count=1 -timeout 30m ./test/realcli/

# The long reliability runs (RELIABILITY.md): every fuzz target in the repo
# for FUZZTIME each (make test runs only their seeds), then the load test at
# HARNESS_LOAD (<clients>x<ops>). Only the packages with a fuzz target
# are listed (go test -list builds a package's test binary).
#
# Go 1.26's fuzz coordinator can fail a target at the very end of its
# -fuzztime with a bare "context deadline exceeded" although no input failed
# (golang/go#75804, fixed in Go 1.27: the deadline of the parent context is
# seen before the workers' child context is cancelled). It is more likely
# the shorter the run and the busier the machine, which is what was seen
# below 10 s. Such a run is reported and counted as passed; any run that
# wrote a failing input, or failed in any other way, fails the target.
#
# FUZZMINTIME bounds the minimization of each new input (go's default is
# 60 s): the harness targets start from fixture files of tens of KiB, and
# minimizing those held both workers for the whole run (the exec counter
# "stopped rising"). An input that fails is still written whole.
FUZZTIME     ?= 30s
# FuzzConn drives the whole 9P layer (both dialects, every bound) from raw
# frames: the one target where a finding means a peer can hurt the daemon,
# so it runs longest.
FUZZCONNTIME ?= 10m
FUZZMINTIME  ?= 2s
HARNESS_LOAD ?= 256x2000
torture: build
	@set -e; out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	for pkg in $$($(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r p d; do grep -qs '^func Fuzz' "$$d"/*_test.go && echo "$$p"; done); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			ft=$(FUZZTIME); if [ $$t = FuzzConn ]; then ft=$(FUZZCONNTIME); fi; \
			echo "== $$pkg $$t ($$ft)"; \
			if $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $$ft -fuzzminimizetime $(FUZZMINTIME) $$pkg >$$out 2>&1; then \
				tail -n 3 $$out; \
			elif grep -q 'context deadline exceeded' $$out && ! grep -q 'Failing input written to' $$out; then \
				tail -n 5 $$out; echo "(no failing input: the end-of-run race of golang/go#75804, counted as passed)"; \
			else \
				cat $$out; exit 1; \
			fi; \
		done; \
	done
	HARNESS_LOAD=$(HARNESS_LOAD) $(GO) test -count=1 -timeout 30m -run '^(TestLoad|TestConnCap|TestNoLeaks)$$' -v ./test/ ./internal/daemon/

# make torture bounded for CI: 5 s per fuzz target and a 64x200 load.
torture-ci:
	$(MAKE) torture FUZZTIME=5s FUZZCONNTIME=5s HARNESS_LOAD=64x200

# Benchmarks never run inside `make test`. The side-by-side run against
# diod needs root (diod serves as root) and writes BENCHMARKS.md.
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...
	$(GO) run ./test/bench -out BENCHMARKS.md

# System-wide (or packaged, with DESTDIR): binaries (and contrib/zmxify, the
# fzf picker, as the Nix package has it), the user units (every
# user then runs systemctl --user enable --now 9harness.socket), the journal
# catalog, the polkit action, the man pages and the shell completions.
#
# Where each goes is where the system reads it, whatever PREFIX is:
# - the user units and the catalog under PREFIX/lib/systemd: systemd reads
#   /usr/lib/systemd and /usr/local/lib/systemd (another PREFIX needs
#   USERUNITDIR= and CATALOGDIR= pointing at one of those);
# - the polkit action in /usr/share/polkit-1/actions for PREFIX=/usr or
#   /usr/local, the one directory every polkitd reads: before polkit 126
#   (Debian 12 has 122) it is the only one, so PREFIX/share/polkit-1/actions
#   would be ignored under PREFIX=/usr/local. Any other PREFIX (/opt/x, a
#   scratch directory) gets everything under PREFIX and nothing outside
#   it: the action in PREFIX/share/polkit-1/actions and no journal catalog
#   update. Set POLKITACTIONDIR= to override.
# - completions: bash-completion's, zsh's and fish's directories under
#   PREFIX/share. bash-completion and fish find /usr/local/share through
#   XDG_DATA_DIRS, which login sessions set; Debian's zsh reads
#   /usr/local/share/zsh/site-functions, but for PREFIX=/usr it wants
#   ZSHCOMPDIR=/usr/share/zsh/vendor-completions (Arch and Fedora read
#   /usr/share/zsh/site-functions).
# A system-wide install (no DESTDIR) then runs journalctl --update-catalog,
# so journalctl -x shows the catalog texts; a staged one (DESTDIR, for a
# package) leaves that to the package's install script.
MANDIR          ?= $(PREFIX)/share/man
USERUNITDIR     ?= $(PREFIX)/lib/systemd/user
CATALOGDIR      ?= $(PREFIX)/lib/systemd/catalog
ifneq ($(filter /usr /usr/local,$(PREFIX)),)
POLKITACTIONDIR ?= /usr/share/polkit-1/actions
else
POLKITACTIONDIR ?= $(PREFIX)/share/polkit-1/actions
endif
BASHCOMPDIR     ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR      ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR     ?= $(PREFIX)/share/fish/vendor_completions.d
JOURNALCTL      ?= journalctl

# The completions the CLI ships (packaging/completions), each installed
# when the checkout has it: source file, then installed name.
COMPLETIONS = packaging/completions/9harness.bash:$(BASHCOMPDIR)/9harness \
	packaging/completions/_9harness:$(ZSHCOMPDIR)/_9harness \
	packaging/completions/9harness.fish:$(FISHCOMPDIR)/9harness.fish
USERCOMPLETIONS = packaging/completions/9harness.bash:$(HOME)/.local/share/bash-completion/completions/9harness \
	packaging/completions/_9harness:$(HOME)/.local/share/zsh/site-functions/_9harness \
	packaging/completions/9harness.fish:$(HOME)/.local/share/fish/vendor_completions.d/9harness.fish

# Every file install puts, relative to DESTDIR (uninstall removes these).
INSTALLED = $(BINDIR)/9harnessd $(BINDIR)/9harness $(BINDIR)/zmxify \
	$(USERUNITDIR)/9harness.socket $(USERUNITDIR)/9harness.service \
	$(USERUNITDIR)/9harness-proc.socket $(USERUNITDIR)/9harness-proc.service \
	$(USERUNITDIR)/9harness-notify.service \
	$(CATALOGDIR)/9harness.catalog $(POLKITACTIONDIR)/org.ninep.harness.move.policy \
	$(MANDIR)/man1/9harness.1 $(MANDIR)/man8/9harnessd.8 \
	$(foreach c,$(COMPLETIONS),$(word 2,$(subst :, ,$(c))))

install: build install-files

# install without building: what install and dist share.
install-files:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(USERUNITDIR) $(DESTDIR)$(CATALOGDIR) \
		$(DESTDIR)$(POLKITACTIONDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(BIN)/9harnessd $(BIN)/9harness contrib/zmxify $(DESTDIR)$(BINDIR)/
	install -m 0644 packaging/systemd/9harness.socket packaging/systemd/9harness-proc.socket $(DESTDIR)$(USERUNITDIR)/
	for u in 9harness 9harness-proc 9harness-notify; do \
		sed 's|@BINDIR@|$(BINDIR)|g' packaging/systemd/$$u.service.in > $(DESTDIR)$(USERUNITDIR)/$$u.service && \
		chmod 0644 $(DESTDIR)$(USERUNITDIR)/$$u.service || exit 1; \
	done
	install -m 0644 packaging/systemd/9harness.catalog $(DESTDIR)$(CATALOGDIR)/
	install -m 0644 packaging/polkit/org.ninep.harness.move.policy $(DESTDIR)$(POLKITACTIONDIR)/
	install -m 0644 packaging/man/9harness.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 packaging/man/9harnessd.8 $(DESTDIR)$(MANDIR)/man8/
	@for c in $(COMPLETIONS); do \
		src=$${c%%:*} dst=$(DESTDIR)$${c#*:}; \
		[ -f "$$src" ] || continue; \
		echo "install -D -m 0644 $$src $$dst"; install -D -m 0644 "$$src" "$$dst" || exit 1; \
	done
	@case "$(DESTDIR):$(CATALOGDIR)" in \
	:/usr/lib/systemd/catalog | :/usr/local/lib/systemd/catalog) \
		echo "$(JOURNALCTL) --update-catalog"; \
		$(JOURNALCTL) --update-catalog || echo "install: journalctl --update-catalog failed: journalctl -x will not show 9harness's texts until it runs" >&2 ;; \
	esac
	@case "$(USERUNITDIR)" in /usr/lib/systemd/user | /usr/local/lib/systemd/user | /etc/systemd/user) ;; \
	*) echo "install: systemd does not read user units from $(USERUNITDIR): set USERUNITDIR=/usr/local/lib/systemd/user (and CATALOGDIR=/usr/local/lib/systemd/catalog)" >&2 ;; \
	esac
	@echo "Installed. Each user enables the daemon with: systemctl --user daemon-reload && systemctl --user enable --now 9harness.socket"

# Removes every file install put (same PREFIX and DESTDIR). Each user's
# enabled socket is theirs to stop first:
#   systemctl --user disable --now 9harness.socket
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	@case "$(DESTDIR):$(CATALOGDIR)" in \
	:/usr/lib/systemd/catalog | :/usr/local/lib/systemd/catalog) \
		echo "$(JOURNALCTL) --update-catalog"; $(JOURNALCTL) --update-catalog || true ;; \
	esac

# For one user, no root: ~/.local/bin (with zmxify), ~/.config/systemd/user, the man
# pages and completions under ~/.local/share. Then
#   systemctl --user daemon-reload && systemctl --user enable --now 9harness.socket
# It says so when ~/.local/bin is not on PATH (9harness would not be found)
# and how zsh finds the completion. The journal catalog and the polkit
# action are system-wide: `make install` installs them.
install-user: build
	install -d $(HOME)/.local/bin $(HOME)/.config/systemd/user $(HOME)/.local/share/man/man1 $(HOME)/.local/share/man/man8
	install -m 0755 $(BIN)/9harnessd $(BIN)/9harness contrib/zmxify $(HOME)/.local/bin/
	install -m 0644 packaging/systemd/9harness.socket packaging/systemd/9harness-proc.socket $(HOME)/.config/systemd/user/
	for u in 9harness 9harness-proc 9harness-notify; do \
		sed 's|@BINDIR@|$(HOME)/.local/bin|g' packaging/systemd/$$u.service.in > $(HOME)/.config/systemd/user/$$u.service && \
		chmod 0644 $(HOME)/.config/systemd/user/$$u.service || exit 1; \
	done
	install -m 0644 packaging/man/9harness.1 $(HOME)/.local/share/man/man1/
	install -m 0644 packaging/man/9harnessd.8 $(HOME)/.local/share/man/man8/
	@for c in $(USERCOMPLETIONS); do \
		src=$${c%%:*} dst=$${c#*:}; \
		[ -f "$$src" ] || continue; \
		echo "install -D -m 0644 $$src $$dst"; install -D -m 0644 "$$src" "$$dst" || exit 1; \
	done
	@case ":$$PATH:" in \
	*":$(HOME)/.local/bin:"* | *":$(HOME)/.local/bin/:"*) ;; \
	*) echo "install-user: $(HOME)/.local/bin is not on your PATH: add it (for example in ~/.profile: PATH=\"\$$HOME/.local/bin:\$$PATH\") or run $(HOME)/.local/bin/9harness" >&2 ;; \
	esac
	@if [ -f packaging/completions/_9harness ]; then \
		echo "install-user: zsh: add fpath=(~/.local/share/zsh/site-functions \$$fpath) before compinit in ~/.zshrc"; \
	fi
	@echo "Installed. Enable the daemon with: systemctl --user daemon-reload && systemctl --user enable --now 9harness.socket"

uninstall-user:
	-systemctl --user disable --now 9harness-notify.service 9harness.socket 9harness.service 9harness-proc.socket 9harness-proc.service
	rm -f $(HOME)/.local/bin/9harnessd $(HOME)/.local/bin/9harness $(HOME)/.local/bin/zmxify \
		$(HOME)/.config/systemd/user/9harness.socket $(HOME)/.config/systemd/user/9harness.service \
		$(HOME)/.config/systemd/user/9harness-proc.socket $(HOME)/.config/systemd/user/9harness-proc.service \
		$(HOME)/.config/systemd/user/9harness-notify.service \
		$(HOME)/.local/share/man/man1/9harness.1 $(HOME)/.local/share/man/man8/9harnessd.8 \
		$(foreach c,$(USERCOMPLETIONS),$(word 2,$(subst :, ,$(c))))
	-systemctl --user daemon-reload

# A release: dist/9harness-VERSION-linux-ARCH.tar.gz, the make install
# layout of PREFIX=/usr/local (unpack it at /: tar -C / -xzf ...), with
# the daemon and the static client built as `make build` builds them and
# VERSION stamped in, and dist/SHA256SUMS. Reproducible: the same commit
# and toolchain give the same bytes (-trimpath, no build id, files sorted,
# owned by root, dated at the commit, gzip without a name or time), so two
# runs give the same sums.
DISTDIR ?= dist
dist:
	@case "$(VERSION)" in v[0-9]*) ;; *) echo "dist: VERSION=vX.Y.Z, not '$(VERSION)'" >&2; exit 2 ;; esac
	@grep -q '^## $(VERSION)\b' CHANGELOG.md || echo "dist: CHANGELOG.md has no section '## $(VERSION)'" >&2
	@set -e; umask 022; \
	arch=$$($(GO) env GOARCH); name=9harness-$(VERSION)-linux-$$arch; \
	stage=$$(mktemp -d); trap 'rm -rf "$$stage"' EXIT; \
	epoch=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || echo 0)}; \
	flags='-trimpath -buildvcs=false'; ld='-buildid= -X main.version=$(VERSION)'; \
	$(GO) build $$flags -ldflags "$$ld" -o $$stage/bin/ ./cmd/9harnessd; \
	CGO_ENABLED=0 $(GO) build $$flags -ldflags "$$ld" -o $$stage/bin/ ./cmd/9harness; \
	$(MAKE) -s install-files BIN=$$stage/bin DESTDIR=$$stage/root PREFIX=/usr/local >/dev/null; \
	mkdir -p $(DISTDIR); \
	tar -C $$stage/root --sort=name --mtime=@$$epoch --owner=0 --group=0 --numeric-owner \
		--format=gnu -cf - . | gzip -9n > $(DISTDIR)/$$name.tar.gz; \
	cd $(DISTDIR) && sha256sum $$name.tar.gz > SHA256SUMS && cat SHA256SUMS

clean:
	rm -rf $(BIN) $(DISTDIR)
