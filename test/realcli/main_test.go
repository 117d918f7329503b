package realcli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bins is where TestMain builds 9harnessd and 9harness.
var bins string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	// A race-built program sleeps a second at exit while other
	// goroutines live (the race runtime's atexit_sleep_ms, for reports
	// from them), and every daemon and client a test starts is one: the
	// suite spent that second on each. A race is still reported when it
	// happens; only one in the last second of a process's life is lost.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	dir, err := os.MkdirTemp("", "9harness-realcli-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	args := []string{"build", "-o", dir + "/"}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "../../cmd/9harnessd", "../../cmd/9harness")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building binaries:", err)
		return 1
	}
	bins = dir
	sweepOrphans()
	code := m.Run()
	drifts.report(os.Stderr, install.used())
	return code
}

func bin(name string) string { return filepath.Join(bins, name) }
