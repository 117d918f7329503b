package authz

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestDialHungUp: a bus that hangs up on a client after its
// authentication, before its Hello is answered (as the system bus does to
// one slower than its auth_timeout), is dialled once more; a bus that
// hangs up again is the answer. The bus is a real dbus-daemon behind a
// proxy that hangs up on the first connections it is told to.
func TestDialHungUp(t *testing.T) {
	bus := startBus(t)
	for _, c := range []struct {
		hangups, conns int
		ok             bool
	}{
		{0, 1, true},
		{1, 2, true},
		{2, 2, false},
		{99, 2, false},
	} {
		px := newHangupProxy(t, bus, c.hangups)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		conn, err := (&Polkit{Bus: "unix:path=" + px.path}).dial(ctx)
		if c.ok {
			if err != nil {
				t.Fatalf("%d hang-ups: %v", c.hangups, err)
			}
			var id string
			if err := conn.BusObject().Call("org.freedesktop.DBus.GetId", 0).Store(&id); err != nil || id == "" {
				t.Errorf("%d hang-ups: the connection does not work: %q %v", c.hangups, id, err)
			}
			conn.Close()
		} else if !hungUp(err) {
			t.Errorf("%d hang-ups: err %v, want the bus's hang-up", c.hangups, err)
		}
		cancel()
		if n := px.accepted(); n != c.conns {
			t.Errorf("%d hang-ups: %d connections, want %d", c.hangups, n, c.conns)
		}
	}
}

// startBus runs a dbus-daemon of its own and gives its socket's path.
func startBus(t *testing.T) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("missing in CI: dbus-daemon (Debian package dbus)")
		}
		t.Skip("needs dbus-daemon")
	}
	dir, err := os.MkdirTemp("", "bus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "bus.conf")
	err = os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=`+sock+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default"><allow send_destination="*"/><allow receive_sender="*"/><allow own="*"/></policy>
</busconfig>
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--nofork", "--config-file="+conf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return sock
		}
		if time.Now().After(deadline) {
			t.Fatalf("dbus-daemon did not listen: %s", stderr.String())
		}
	}
}

// hangupProxy passes connections to a bus, but hangs up on each of the
// first hangups of them as soon as its client has ended authentication
// (BEGIN), before the bus answers its Hello.
type hangupProxy struct {
	path string
	mu   sync.Mutex
	n    int
}

func newHangupProxy(t *testing.T, bus string, hangups int) *hangupProxy {
	t.Helper()
	px := &hangupProxy{path: filepath.Join(filepath.Dir(bus), fmt.Sprint("proxy", hangups))}
	l, err := net.Listen("unix", px.path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			px.mu.Lock()
			px.n++
			hangup := px.n <= hangups
			px.mu.Unlock()
			wg.Go(func() { px.serve(c, bus, hangup) })
		}
	})
	return px
}

func (px *hangupProxy) accepted() int {
	px.mu.Lock()
	defer px.mu.Unlock()
	return px.n
}

func (px *hangupProxy) serve(c net.Conn, bus string, hangup bool) {
	defer c.Close()
	b, err := net.Dial("unix", bus)
	if err != nil {
		return
	}
	defer b.Close()
	go func() { io.Copy(c, b); c.Close() }()
	var seen []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			seen = append(seen, buf[:n]...)
			if hangup && bytes.Contains(seen, []byte("BEGIN\r\n")) {
				return
			}
			if _, err := b.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
