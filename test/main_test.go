// Package test holds the integration tests: the real daemon binary on a
// temporary socket, read through the project's own client and through
// diod's independent clients, on fixture homes copied from testdata/.
package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bins is where TestMain builds the binaries: a directory every uid may
// traverse, because some tests run the client as another user.
var bins string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Getenv("HELPER_SOCK") != "" || os.Getenv("HELPER_POLKIT") != "" || os.Getenv("HELPER_WRITE_SOCK") != "" || os.Getenv("HELPER_POLL") != "" || os.Getenv("HELPER_SPY") != "" {
		return m.Run() // a helper peer run by a test: needs no binaries
	}
	dir, err := os.MkdirTemp("", "9harness-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	args := []string{"build", "-o", dir + "/"}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "../cmd/9harnessd", "../cmd/9harness")
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building binaries:", err)
		return 1
	}
	// The fake harness, under the names the harnesses' processes have.
	fake := filepath.Join(dir, "fakeharness")
	if out, err := exec.Command("go", "build", "-o", fake, "./fakeharness").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the fake harness: %v\n%s", err, out)
		return 1
	}
	for _, name := range []string{"claude", "codex", "omp", "pi", "hermes", "gemini"} {
		if err := os.Link(fake, filepath.Join(dir, name)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	// The fake zmx, under its real name: a test puts bins on PATH.
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "zmx"), "./fakezmx").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the fake zmx: %v\n%s", err, out)
		return 1
	}
	// The confining wrapper (Landlock, seccomp) of the kernel-sandbox tests.
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "confine"), "./confine").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building confine: %v\n%s", err, out)
		return 1
	}
	// A copy of the test binary itself, runnable by other uids: tests
	// re-run it as a helper peer under another uid.
	self, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "self.test"), self, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "copying test binary:", err)
		return 1
	}
	bins = dir
	return m.Run()
}

func bin(name string) string { return filepath.Join(bins, name) }
