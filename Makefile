# 9harness. `make run` serves your own harness directories read-only;
# `make test` installs what the tests need (once) and runs every test.

GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build run test deps vet bench clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/9harnessd ./cmd/9harness

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
	@out=$$(gofmt -l cmd internal test); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test: deps vet
	$(GO) test -race -count=1 -timeout 40m ./...

# Benchmarks never run inside `make test`. The side-by-side run against
# diod needs root (diod serves as root) and writes BENCHMARKS.md.
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...
	$(GO) run ./test/bench -out BENCHMARKS.md

clean:
	rm -rf $(BIN)
