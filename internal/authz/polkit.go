package authz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/godbus/dbus/v5"
)

// Polkit asks the system's polkitd over the system bus.
type Polkit struct {
	// Bus is the system bus address; empty means the default
	// (DBUS_SYSTEM_BUS_ADDRESS or /run/dbus/system_bus_socket).
	Bus string
}

var _ Checker = (*Polkit)(nil)

// Check implements Checker with
// org.freedesktop.PolicyKit1.Authority.CheckAuthorization: the subject is a
// unix-process (pid, start time, uid), no interaction is allowed, and the
// details map is empty (polkitd refuses details from untrusted callers).
// A result that would need interactive authentication is a denial.
func (p *Polkit) Check(ctx context.Context, s Subject, actionID string) (bool, string, error) {
	if s.PID <= 0 || s.StartTime == 0 {
		return false, "", errors.New("the peer's pid and start time are unknown (is it in another pid namespace?)")
	}
	conn, err := p.dial(ctx)
	if err != nil {
		return false, "", fmt.Errorf("system bus: %w", err)
	}
	defer conn.Close()
	subject := struct {
		Kind    string
		Details map[string]dbus.Variant
	}{"unix-process", map[string]dbus.Variant{
		"pid":        dbus.MakeVariant(uint32(s.PID)),
		"start-time": dbus.MakeVariant(s.StartTime),
		"uid":        dbus.MakeVariant(int32(s.UID)),
	}}
	var res struct {
		Authorized bool
		Challenge  bool
		Details    map[string]string
	}
	obj := conn.Object("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority")
	call := obj.CallWithContext(ctx, "org.freedesktop.PolicyKit1.Authority.CheckAuthorization", 0,
		subject, actionID, map[string]string{}, uint32(0), "")
	if call.Err != nil {
		return false, "", fmt.Errorf("polkitd: %w", call.Err)
	}
	if err := call.Store(&res); err != nil {
		return false, "", fmt.Errorf("polkitd reply: %w", err)
	}
	switch {
	case res.Authorized:
		return true, "authorized", nil
	case res.Challenge:
		return false, "interactive authentication would be required, and a daemon cannot ask", nil
	}
	return false, "not authorized for uid " + fmt.Sprint(s.UID), nil
}

// dial connects to the bus, and once more if the bus hung up before the
// connection was done: the system bus drops a client that has not said
// Hello within its auth_timeout (5 s), which a client on a busy machine
// can miss. A second hang-up is the answer.
func (p *Polkit) dial(ctx context.Context) (*dbus.Conn, error) {
	conn, err := p.connect(ctx)
	if hungUp(err) && ctx.Err() == nil {
		conn, err = p.connect(ctx)
	}
	return conn, err
}

// hungUp tells whether err is the bus closing the connection: during
// the Hello (ErrClosed), or during authentication.
func hungUp(err error) bool {
	return errors.Is(err, dbus.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (p *Polkit) connect(ctx context.Context) (*dbus.Conn, error) {
	if p.Bus == "" {
		return dbus.ConnectSystemBus(dbus.WithContext(ctx))
	}
	return dbus.Connect(p.Bus, dbus.WithContext(ctx))
}
