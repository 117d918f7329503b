package confine

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary's main goroutine keeps the main thread, so TestMain runs
// on it and can ask restrictAndStart to work there.
func init() { runtime.LockOSThread() }

var mainThreadStatus []byte

// TestMain starts a confined program from the main thread, as a
// goroutine that happens to run there would, and keeps what the kernel
// then says of the whole process.
func TestMain(m *testing.M) {
	if unix.Gettid() == unix.Getpid() {
		if rs, err := ruleset(nil); err == nil {
			cmd := exec.Command("/bin/true")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
			errc := make(chan error, 1)
			restrictAndStart(cmd, rs, errc)
			if <-errc == nil {
				cmd.Wait()
			}
			unix.Close(rs)
			mainThreadStatus, _ = os.ReadFile("/proc/self/status")
		}
	}
	os.Exit(m.Run())
}

// TestMainThreadUnrestricted: a confined start asked of the main thread
// leaves it as it was: the process's status (the main thread's) shows no
// no_new_privs, so the daemon never looks sandboxed to its own judgement.
func TestMainThreadUnrestricted(t *testing.T) {
	if mainThreadStatus == nil {
		t.Fatal("TestMain did not run on the main thread, or the kernel has no Landlock")
	}
	if !bytes.Contains(mainThreadStatus, []byte("NoNewPrivs:\t0")) {
		t.Errorf("after a confined start from the main thread, the process's status says:\n%s", mainThreadStatus)
	}
}
