package move

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Detached runs the host command in a session of its own (setsid) and
// waits for it: zmx run -d and tmux new-session -d return once the session
// exists, and the session's own daemon has already left the command's
// process tree. Used where no systemd user manager is reachable.
type Detached struct{}

// Launch implements Launcher.
func (Detached) Launch(ctx context.Context, argv []string, cwd string, env []string, unit, description string) error {
	ctx, cancel := context.WithTimeout(ctx, LaunchTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = cwd
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", filepath.Base(argv[0]), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Systemd runs the host command as a transient unit of the user's systemd
// manager, so the session it creates lives in that unit's cgroup and not
// in the daemon's: stopping, restarting or idle-exiting 9harness.service
// never touches a moved agent. The unit is a oneshot that remains after
// its command exits, keeping the session's processes.
type Systemd struct {
	// Private is the manager's private socket
	// ($XDG_RUNTIME_DIR/systemd/private), reached without a bus daemon.
	Private string
}

// UserManager returns a Systemd launcher when the user's manager is
// reachable, or nil.
func UserManager() *Systemd {
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return nil
	}
	p := filepath.Join(rt, "systemd", "private")
	if fi, err := os.Stat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil
	}
	return &Systemd{Private: p}
}

// Launch implements Launcher. The unit's properties can be read back from
// the manager and its Description goes to the journal, so they carry only
// the host command (the launcher and a file name, no value of the
// agent's), the host command's own environment (Host.Env: the daemon's
// PATH and locale, the zmx socket directory) and a description naming the
// harness and the session.
func (s *Systemd) Launch(ctx context.Context, argv []string, cwd string, env []string, unit, description string) error {
	// The move's context is never cancelled (a move completes whether or
	// not its client stays): a manager that does not answer must not hold
	// the move, and the daemon's shutdown, forever.
	ctx, cancel := context.WithTimeout(ctx, LaunchTimeout)
	defer cancel()
	conn, err := sddbus.NewConnection(func() (*dbus.Conn, error) {
		c, err := dbus.Dial("unix:path=" + s.Private)
		if err != nil {
			return nil, err
		}
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(fmt.Sprint(os.Getuid()))}); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	})
	if err != nil {
		return fmt.Errorf("user manager: %w", err)
	}
	defer conn.Close()
	props := []sddbus.Property{
		sddbus.PropDescription(description),
		sddbus.PropType("oneshot"),
		sddbus.PropRemainAfterExit(true),
		sddbus.PropExecStart(argv, false),
		{Name: "WorkingDirectory", Value: dbus.MakeVariant(cwd)},
		{Name: "Environment", Value: dbus.MakeVariant(env)},
	}
	ch := make(chan string, 1)
	if _, err := conn.StartTransientUnitContext(ctx, unit+".service", "fail", props, ch); err != nil {
		return fmt.Errorf("transient unit %s: %w", unit, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("transient unit %s: %s", unit, res)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
