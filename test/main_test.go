// Package test holds the integration tests: the real daemon binary on a
// temporary socket, read through the project's own client and through
// diod's independent clients, on fixture homes copied from testdata/.
package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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
	// The builds run at once: each is mostly a link, one CPU each, and
	// the package's tests wait for all of them.
	args := []string{"build", "-o", dir + "/"}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "../cmd/9harnessd", "../cmd/9harness")
	fake := filepath.Join(dir, "fakeharness")
	builds := []struct {
		what string
		args []string
	}{
		{"the binaries", args},
		// The fake harness, under the names the harnesses' processes have.
		{"the fake harness", []string{"build", "-o", fake, "./fakeharness"}},
		// The fake zmx, under its real name: a test puts bins on PATH.
		{"the fake zmx", []string{"build", "-o", filepath.Join(dir, "zmx"), "./fakezmx"}},
		// The confining wrapper (Landlock, seccomp) of the kernel-sandbox tests.
		{"confine", []string{"build", "-o", filepath.Join(dir, "confine"), "./confine"}},
		// TestLoad's clients, without -race (see loadgen).
		{"loadgen", []string{"build", "-o", filepath.Join(dir, "loadgen"), "./loadgen"}},
	}
	errs := make([]error, len(builds))
	outs := make([][]byte, len(builds))
	var wg sync.WaitGroup
	for i, b := range builds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = exec.Command("go", b.args...).CombinedOutput()
		}()
	}
	wg.Wait()
	for i, b := range builds {
		if errs[i] != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b.what, errs[i], outs[i])
			return 1
		}
	}
	for _, name := range []string{"claude", "codex", "omp", "pi", "hermes", "gemini"} {
		if err := os.Link(fake, filepath.Join(dir, name)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
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
