//go:build redteam

// Package redteam is the standing adversarial tier (`make redteam`): one
// attacker per way a peer has made the daemon take memory, lock the owner
// out, or get more than the kernel gives it, each against the real daemon
// binary inside a memory cgroup of 512 MiB (the unit's MemoryMax). Every
// attacker checks the same ceilings: the daemon's VmHWM (from the kernel)
// at most 384 MiB, no OOM kill, every owner `ls /` meanwhile answered
// within 5 s. It prints a table of the figures at the end, the one
// RELIABILITY.md quotes.
//
// The build tag keeps it out of `go test ./...` (make test): it runs once,
// without the race detector, whose shadow memory would blur the figures.
// A feature that lets a peer cause work adds its attacker here.
package redteam

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bins is where TestMain builds the binaries: a directory every uid may
// traverse, because the owner, a grantee and an ungranted uid each run
// the client or this test binary.
var bins string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if helperMode() {
		return m.Run() // a helper peer started by an attacker
	}
	dir, err := os.MkdirTemp("", "9harness-redteam-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	build := func(out string, pkgs ...string) error {
		cmd := exec.Command("go", append([]string{"build", "-o", out}, pkgs...)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	if err := build(dir+"/", "../../cmd/9harnessd", "../../cmd/9harness"); err != nil {
		fmt.Fprintln(os.Stderr, "building binaries:", err)
		return 1
	}
	// The fake harness, under the names of the agents the attackers need.
	fake := filepath.Join(dir, "fakeharness")
	if err := build(fake, "../fakeharness"); err != nil {
		fmt.Fprintln(os.Stderr, "building the fake harness:", err)
		return 1
	}
	for _, name := range []string{"claude", "codex"} {
		if err := os.Link(fake, filepath.Join(dir, name)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	// A copy of this test binary that other uids may run: the helper
	// peers (a flood, a confined client) are this binary again.
	self, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "self.test"), self, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "copying the test binary:", err)
		return 1
	}
	bins = dir
	code := m.Run()
	printSummary()
	return code
}

func bin(name string) string { return filepath.Join(bins, name) }
