// Package mount is `9harness mount` and `9harness umount`: the tree of
// one daemon, or one directory per host of a fleet, mounted through FUSE
// and served in the foreground or by a background process.
package mount

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fusefs"
)

// Help is the help of both mount and umount.
const Help = `usage: 9harness [-s SOCKET] mount [-f] DIR
       9harness [--ssh DEST]... mount [-f] [--all] [--hosts FILE] [--timeout D] DIR
       9harness umount DIR

mount: mount the daemon's tree on DIR through FUSE, for any program to
read: ls, cat, tail -f, grep -r. Only you see it (no allow_other; not even
root). Files are read live, so a transcript that grows is longer on the next
read. Under 9harnessd --allow-move, writing a session name into an agent's
zmx or tmux file moves it (echo NAME > DIR/active/claude/PID/zmx); every
other change answers "Read-only file system".

By default mount returns once the tree is mounted, leaving a background
process serving it until the mount is unmounted; -f keeps it in the
foreground instead, until unmounted or interrupted (SIGINT, SIGTERM or
SIGHUP unmount it; if the mount is busy it is detached lazily). Either way
it prints "mounted SOCKET on DIR". If the daemon goes away (it was stopped
or restarted), the mount is unmounted: mount it again.

As root the mount is made directly; otherwise by fusermount3 (Debian
package fuse3), which must be setuid root, with /dev/fuse readable and
writable by you (the distribution's udev rule makes it 0666).

umount: unmount DIR (a 9harness mount only): umount(2) as root, else
fusermount3 -u DIR (see 9harness umount --help).

A directory where a 9harness mount already is is refused: unmount it first.

Fleet: with --all (this machine and every host of the hosts file, as for
ps --all), --hosts FILE or --ssh DEST (repeatable), DIR holds one directory
per host, DIR/HOST/active and so on, HOST the name as the hosts file or
--ssh writes it, and this machine as DIR/local (ps writes "-", which most
commands would take for an option or standard input). Each host is one 9P
connection: its socket, or ssh running 9harness relay. A host is in DIR
while it answers: one that does not answer a probe (every 2 s) within
--timeout, or whose connection ends, leaves DIR, and a read of its files
fails with EIO; it is dialed again (2 s, 4 s, 8 s, then every 10 s) and
comes back when it answers. A dial (ssh's connecting and login, the relay's
start) is given 30 s, or --timeout if longer, then ended (its ssh killed).
A host that never answered is not in DIR. The mount waits for each host's
first answer (at most --timeout), then says "mounted N hosts on DIR", or
"mounted K of N hosts on DIR" with a line for each host that did not answer
and why; one still dialing appears once it answers. The mount stays until
unmounted, whatever its hosts do.

Options:
  -f, --foreground  stay in the foreground (a fleet mount logs its hosts
                    coming and going to standard error)
  -d, --debug       log every FUSE request to standard error (implies -f)
  --all             this machine and every host of the hosts file
  --hosts FILE      the hosts of FILE (with --all, instead of the default)
  --timeout D       how long a host may take to answer: 5s (the default)
  -h, --help        this text
`

// UmountHelp is umount's own, for umount --help.
const UmountHelp = `usage: 9harness umount DIR

Unmount the 9harness mount on DIR (a 9harness mount only: another file
system there is refused): umount(2) as root, else fusermount3 -u DIR. A
mount that a process still uses is busy and stays.

Options:
  -h, --help  this text
`

// notifyEnv names the descriptor on which a background mount process
// reports that the tree is mounted ("ok"); its standard error is the same
// pipe until then, so its errors (and fusermount3's) reach the caller.
const notifyEnv = "NINEHARNESS_MOUNT_NOTIFY_FD"

// Run is `9harness mount [-f] DIR`.
func Run(g *cli.Globals, args []string, stdout, stderr io.Writer) int {
	fl := g.FlagSet("mount")
	fg := fl.BoolP("foreground", "f", false, "")
	debug := fl.BoolP("debug", "d", false, "")
	ff := cli.AddFleetFlags(fl)
	fl.Func("timeout", "", func(v string) error {
		d, err := cli.ParseTimeout(v)
		ff.Timeout = d
		return err
	})
	ops, status, ok := g.ParseFlags(fl, args, true, stdout, stderr)
	if !ok {
		return status
	}
	if ff.All || fl.Changed("hosts") || len(g.SSHDests) > 0 {
		return runFleetMount(g, *ff, fl.Changed("hosts"), ops, *fg || *debug, *debug, stdout, stderr)
	}
	if fl.Changed("timeout") {
		fmt.Fprintln(stderr, "9harness mount: --timeout is for --all, --hosts or --ssh")
		return cli.ExitUsage
	}
	if !g.LocalOnly(stderr, "mount works on this machine's daemon; it takes no --ssh (forward the remote socket with ssh -L and use -s)") {
		return cli.ExitUsage
	}
	if _, status := g.Check(stderr); status != cli.ExitOK {
		return status
	}
	if len(ops) != 1 {
		fmt.Fprintln(stderr, "9harness mount: expected one directory: 9harness mount [-f] DIR (try '9harness mount --help')")
		return cli.ExitUsage
	}
	sock := g.Sock
	dir, err := filepath.Abs(ops[0])
	if err == nil {
		sock, err = filepath.Abs(sock)
	}
	if err != nil {
		fmt.Fprintf(stderr, "9harness mount: %v\n", err)
		return cli.ExitError
	}
	if status := checkMountDir(dir, stderr); status != cli.ExitOK {
		return status
	}
	if !*fg && !*debug {
		return mountBackground([]string{"-s", sock, "mount", "-f", dir}, sock, dir, stdout, stderr)
	}
	return mountForeground(dir, sock, stdout, stderr, *debug)
}

// checkMountDir says whether dir can take a mount: a directory, not
// already a 9harness mount. A second mount would hide the first under it,
// still served, until both were unmounted one by one. The mount table is
// asked before any stat, which a mount whose server died answers with
// ENOTCONN.
func checkMountDir(dir string, stderr io.Writer) int {
	if mp, err := mountPath(dir); err == nil {
		if ours, err := isOurMount(mp); err == nil && ours {
			fmt.Fprintf(stderr, "9harness mount: %s: a 9harness mount is already there (9harness umount %s first)\n", mp, client.ShellQuote(mp))
			return cli.ExitError
		}
	}
	if fi, err := os.Stat(dir); err != nil {
		fmt.Fprintf(stderr, "9harness mount: %v\n", pathErr(err))
		return cli.ExitError
	} else if !fi.IsDir() {
		fmt.Fprintf(stderr, "9harness mount: %s: not a directory\n", dir)
		return cli.ExitError
	}
	return cli.ExitOK
}

// mountBackground runs 9harness with args (a mount -f) as a new session,
// detached from the terminal, and returns when it has mounted the tree or
// failed to; what is named what it says it mounted, unless the process
// says otherwise.
func mountBackground(args []string, what, dir string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "9harness mount: %v\n", err)
		return cli.ExitError
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "9harness mount: %v\n", err)
		return cli.ExitError
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), notifyEnv+"=3")
	cmd.Dir = "/"
	cmd.Stderr = w
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		fmt.Fprintf(stderr, "9harness mount: %v\n", err)
		return cli.ExitError
	}
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(r); got <- b }()
	var out []byte
	select {
	case out = <-got:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		fmt.Fprintf(stderr, "9harness mount: not mounted after 30 s; gave up\n")
		return cli.ExitError
	}
	r.Close()
	text := strings.TrimSuffix(string(out), "\n")
	i := strings.LastIndexByte(text, '\n') + 1
	if last := text[i:]; last == "ok" || strings.HasPrefix(last, "ok ") {
		fmt.Fprint(stderr, text[:i])
		if said := strings.TrimPrefix(last, "ok "); said != last {
			what = said
		}
		cmd.Process.Release()
		fmt.Fprintf(stdout, "mounted %s on %s\n", what, dir)
		return cli.ExitOK
	}
	cmd.Wait()
	if text == "" {
		text = "9harness mount: the mount process exited: " + cmd.ProcessState.String()
	}
	fmt.Fprintln(stderr, text)
	return cli.ExitError
}

// notifyFile is the descriptor a background mount reports on, if this
// process is one.
func notifyFile() *os.File {
	fd, err := strconv.Atoi(os.Getenv(notifyEnv))
	if err != nil || fd <= 2 {
		return nil
	}
	syscall.CloseOnExec(fd)
	os.Unsetenv(notifyEnv)
	return os.NewFile(uintptr(fd), "notify")
}

// detach tells the waiting caller the tree is mounted ("ok WHAT": the
// caller may not know how many hosts of a fleet answered), and sends this
// process's output, which nobody reads any more, to /dev/null.
func detach(notify *os.File, what string) {
	fmt.Fprintln(notify, "ok "+what)
	notify.Close()
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		unix.Dup2(int(null.Fd()), 1)
		unix.Dup2(int(null.Fd()), 2)
		null.Close()
	}
}

// mountForeground mounts and serves until the mount is gone.
func mountForeground(dir, sock string, stdout, stderr io.Writer, debug bool) int {
	notify := notifyFile()
	c, err := client.Dial(sock)
	if err != nil {
		fmt.Fprintf(stderr, "9harness mount: %v\n", client.DialError(sock, err))
		return cli.ExitError
	}
	defer c.Close()
	lost := make(chan error, 1)
	srv, err := fusefs.Mount(dir, c, fusefs.Options{
		Socket: sock,
		OnLost: func(err error) { lost <- err },
		Debug:  debug,
	})
	if err != nil {
		fmt.Fprintf(stderr, "9harness mount: %s: %v\n%s", dir, strings.TrimSpace(err.Error()), mountHint(err))
		return cli.ExitError
	}
	return serve(srv, dir, sock, notify, lost, 0, stdout, stderr)
}

// served is a mounted tree as serve needs it: Wait returns once the
// kernel has let go of it.
type served interface {
	Wait()
	Unmount() error
}

// serve says the tree is mounted (to the process that waits for a
// background mount, or on stdout), and serves it until it is unmounted from
// outside (9harness umount, fusermount3 -u), SIGINT, SIGTERM or SIGHUP
// comes, or lost says the daemon is gone (a nil lost: never). Then it
// unmounts dir, lazily when the mount is busy, and goes on serving the
// busy mount up to linger while its users let go. what is what was
// mounted, as the line says it.
func serve(m served, dir, what string, notify *os.File, lost <-chan error, linger time.Duration, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	go func() { m.Wait(); close(done) }()
	if notify != nil {
		detach(notify, what)
	} else {
		fmt.Fprintf(stdout, "mounted %s on %s\n", what, dir)
	}

	status := cli.ExitOK
	select {
	case <-done:
		return cli.ExitOK
	case <-sigs:
	case err := <-lost:
		fmt.Fprintf(stderr, "9harness mount: lost the daemon at %s (%v): unmounting %s\n", what, err, dir)
		status = cli.ExitError
	}
	if err := m.Unmount(); err != nil {
		// Busy: detach it now; whoever still uses it gets ENOTCONN
		// once this process is gone.
		fmt.Fprintf(stderr, "9harness mount: %s is busy; detaching it\n", dir)
		if err := detachMount(dir); err != nil {
			fmt.Fprintf(stderr, "9harness mount: cannot unmount %s: %v\n", dir, err)
			return cli.ExitError
		}
		select {
		case <-done:
		case <-time.After(linger):
		}
	}
	return status
}

// mountHint explains the usual reasons a mount fails.
func mountHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "executable file not found"):
		return "  (install fusermount3: Debian package fuse3)\n"
	case strings.Contains(msg, "fusermount"):
		return "  (fusermount3 failed: it must be setuid root, and /dev/fuse readable and writable by you)\n"
	case errors.Is(err, syscall.ENODEV) || errors.Is(err, os.ErrNotExist):
		return "  (this kernel has no FUSE: modprobe fuse)\n"
	}
	return ""
}

// detachMount lazily unmounts dir.
func detachMount(dir string) error {
	if os.Geteuid() == 0 {
		return unix.Unmount(dir, unix.MNT_DETACH)
	}
	return runFusermount("-u", "-z", dir)
}

func runFusermount(args ...string) error {
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		if bin, err = exec.LookPath("fusermount"); err != nil {
			return errors.New("fusermount3 is not installed (Debian package fuse3)")
		}
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		if s := strings.TrimSpace(string(out)); s != "" {
			return errors.New(s)
		}
		return err
	}
	return nil
}

// RunUmount is `9harness umount DIR`.
func RunUmount(g *cli.Globals, args []string, stdout, stderr io.Writer) int {
	ops, status, ok := g.ParseFlags(g.FlagSet("umount"), args, true, stdout, stderr)
	if !ok {
		return status
	}
	if !g.LocalOnly(stderr, "umount works on this machine; it takes no --ssh") {
		return cli.ExitUsage
	}
	if len(ops) != 1 {
		fmt.Fprintln(stderr, "9harness umount: expected one directory: 9harness umount DIR (try '9harness umount --help')")
		return cli.ExitUsage
	}
	dir, err := mountPath(ops[0])
	if err != nil {
		fmt.Fprintf(stderr, "9harness umount: %v\n", err)
		return cli.ExitError
	}
	if ok, err := isOurMount(dir); err != nil {
		fmt.Fprintf(stderr, "9harness umount: %v\n", err)
		return cli.ExitError
	} else if !ok {
		fmt.Fprintf(stderr, "9harness umount: %s: not a 9harness mount\n", dir)
		return cli.ExitError
	}
	if os.Geteuid() == 0 {
		err = unix.Unmount(dir, 0)
		if errors.Is(err, unix.EBUSY) {
			err = errors.New("busy: a process has a file or its working directory there")
		}
	} else {
		err = runFusermount("-u", dir)
	}
	if err != nil {
		fmt.Fprintf(stderr, "9harness umount: %s: %v\n", dir, err)
		return cli.ExitError
	}
	fmt.Fprintf(stdout, "unmounted %s\n", dir)
	return cli.ExitOK
}

// mountPath is the absolute path of a mount point as the mount table
// spells it: symlinks resolved in its parent, never by a stat of the mount
// itself (a mount whose server died answers ENOTCONN).
func mountPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if abs == "/" {
		return abs, nil
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", pathErr(err)
	}
	return filepath.Join(parent, filepath.Base(abs)), nil
}

// isOurMount reports whether dir is a mount point of type fuse.9harness
// in this mount namespace.
func isOurMount(dir string) (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || unescapeMount(f[4]) != dir {
			continue
		}
		for i := 5; i+1 < len(f); i++ {
			if f[i] == "-" {
				if f[i+1] == "fuse.9harness" {
					return true, nil
				}
				break
			}
		}
	}
	return false, nil
}

// unescapeMount decodes the octal escapes (\040 for a space) of
// /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}
