package client

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeSSH is an ssh that answers the forward's setup as MODE says: -G
// names the control socket in DIR, -O check a master, the relay's
// --where a remote socket; -O forward and -O cancel leave a mark.
const fakeSSH = `#!/bin/sh
for a in "$@"; do
	case "$a" in
	-G) [ "$MODE" = nocontrol ] && echo "controlpath none" || echo "controlpath $DIR/cp"; exit 0;;
	check) [ "$MODE" = own ] && echo "Master running (pid=4242)" >&2 || echo "Master running (pid=1)" >&2; exit 0;;
	forward) touch "$DIR/forwarded"; exit 0;;
	cancel) touch "$DIR/cancelled"; exit 0;;
	esac
done
echo "$DIR/remote.sock"
`

// TestMakeForward: the setup's refusals, and a forward that takes the
// connection but never answers 9P, which must fail the setup by its
// deadline (a Close waits for the setup) and be cancelled.
func TestMakeForward(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
	}{
		{"nocontrol", "no ControlPath"},
		{"own", "the relay call's own"},
		{"silent", "does not reach the daemon"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			prog := filepath.Join(dir, "ssh")
			if err := os.WriteFile(prog, []byte(fakeSSH), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("DIR", dir)
			t.Setenv("MODE", tc.mode)
			// The forward's socket, as a master would serve it: it
			// takes the connection and says nothing.
			l, err := net.Listen("unix", fwdSocket(filepath.Join(dir, "cp"), filepath.Join(dir, "remote.sock")))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					defer c.Close()
				}
			}()
			start := time.Now()
			local, err := makeForward(SSH{Dest: "host", Program: prog}, start.Add(time.Second), 4242)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("makeForward = %q, %v; want an error saying %q", local, err, tc.want)
			}
			if took > 5*time.Second {
				t.Fatalf("makeForward took %v with a 1 s deadline", took)
			}
			_, err = os.Stat(filepath.Join(dir, "cancelled"))
			if cancelled := err == nil; cancelled != (tc.mode == "silent") {
				t.Fatalf("forward cancelled: %v, want %v", cancelled, tc.mode == "silent")
			}
		})
	}
}
