package ninep

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"9fans.net/go/plan9"
	plan9client "9fans.net/go/plan9/client"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/tree"
)

// writableDir is a root with one writable file, "tmux", whose content is
// "work\n" and whose write answers with the error its value names.
type writableDir struct{}

func (writableDir) Attr() (tree.Attr, error) { return tree.Attr{Dir: true, Mode: 0o555, Path: 1}, nil }
func (writableDir) Lookup(name string) (tree.Node, error) {
	if name == "tmux" {
		return hostNode{}, nil
	}
	return nil, errs.E("lookup", errs.NotExist, name, nil)
}
func (writableDir) List() ([]tree.Entry, error) { return []tree.Entry{{Name: "tmux", Path: 2}}, nil }

type hostNode struct{}

const hostContent = "work\n"

func (hostNode) Attr() (tree.Attr, error) {
	return tree.Attr{Mode: 0o644, Size: int64(len(hostContent)), Path: 2}, nil
}
func (hostNode) Open() (tree.Handle, error) { return nopCloser{strings.NewReader(hostContent)}, nil }

// stoppedErr is a failure after the write had begun to act.
type stoppedErr struct{ error }

func (stoppedErr) Stopped() bool   { return true }
func (e stoppedErr) Unwrap() error { return e.error }

func (hostNode) Write(ctx context.Context, w tree.Writer, data []byte) error {
	switch string(data) {
	case "ok":
		return nil
	case "refuse":
		return errs.E("move", errs.Permission, "refuse", errors.New("harness.Resume: permission denied: claude pid 7: nothing to resume yet"))
	case "refuse-io": // a refusal whose kind is IO, marked as not stopped
		return notStopped{errs.E("move", errs.IO, "x", errors.New("could not tell whether the name is in use"))}
	case "fail":
		return stoppedErr{errs.E("move", errs.IO, "fail", errors.New("no claude process appeared\nwithin 20s; resume by hand: cd /x && claude --resume s"))}
	}
	return errs.E("move", errs.Invalid, string(data), errors.New("byte ' ' is not allowed in a session name"))
}

type notStopped struct{ error }

func (notStopped) Stopped() bool   { return false }
func (e notStopped) Unwrap() error { return e.error }

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

var reasonRows = []struct {
	value  string
	errno  linux.Errno
	kind   string // the 9P2000 spelling
	reason string
}{
	{"refuse", linux.EPERM, "permission denied", "refused: harness.Resume: permission denied: claude pid 7: nothing to resume yet\n"},
	{"a b", linux.EINVAL, "invalid argument", "refused: byte ' ' is not allowed in a session name\n"},
	{"refuse-io", linux.EIO, "i/o error", "refused: could not tell whether the name is in use\n"},
	{"fail", linux.EIO, "i/o error", "failed: no claude process appeared within 20s; resume by hand: cd /x && claude --resume s\n"},
}

// Over 9P2000.L, through the p9 fork's server and client: a refused write
// leaves its reason on the fid that wrote, a read of that fid returns it,
// and another fid still reads the file. A write that succeeds leaves no
// reason.
func TestReasonL(t *testing.T) {
	srv, cli, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	go p9.NewServer(&Attacher{Root: writableDir{}}, p9.WithMaxMessageSize(1<<20)).Handle(srv, srv)
	c, err := p9.NewClient(cli, p9.WithMessageSize(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.Attach("/")
	if err != nil {
		t.Fatal(err)
	}
	open := func(mode p9.OpenFlags) p9.File {
		_, f, err := root.Walk([]string{"tmux"})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.Open(mode); err != nil {
			t.Fatalf("open %v: %v", mode, err)
		}
		return f
	}
	read := func(f p9.File) string {
		b := make([]byte, 8192)
		n, err := f.ReadAt(b, 0)
		if err != nil && err != io.EOF {
			t.Fatalf("read: %v", err)
		}
		return string(b[:n])
	}
	for _, r := range reasonRows {
		f := open(p9.ReadWrite)
		other := open(p9.ReadOnly)
		_, err := f.WriteAt([]byte(r.value), 0)
		var e linux.Errno
		if !errors.As(err, &e) || e != r.errno {
			t.Errorf("%s: write: %v, want %v", r.value, err, r.errno)
		}
		if got := read(f); got != r.reason {
			t.Errorf("%s: the writing fid reads %q, want %q", r.value, got, r.reason)
		}
		if got := read(other); got != hostContent {
			t.Errorf("%s: another fid reads %q, want the file", r.value, got)
		}
		if got := read(open(p9.ReadOnly)); got != hostContent {
			t.Errorf("%s: a new fid reads %q, want the file", r.value, got)
		}
		// A later write that succeeds clears the reason.
		if _, err := f.WriteAt([]byte("ok"), 0); err != nil {
			t.Fatal(err)
		}
		if got := read(f); got != hostContent {
			t.Errorf("%s: after a good write the fid reads %q", r.value, got)
		}
		f.Close()
		other.Close()
	}
	// A read-write open of a file that cannot be written is still refused.
	_, ro, _ := root.Walk(nil)
	if _, _, err := ro.Open(p9.ReadWrite); err == nil {
		t.Error("a directory opened read-write")
	}
}

// Over plain 9P2000: the same, and Rerror carries the reason after the
// spelling clients map to an errno.
func TestReason9P2000(t *testing.T) {
	srv, cli, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	go NewPlan9(writableDir{}, "u", 8192, tree.Writer{}, nil).Serve(srv, srv)
	conn, err := plan9client.NewConn(cli)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := conn.Attach(nil, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	read := func(f *plan9client.Fid) string {
		b := make([]byte, 8192)
		n, err := f.ReadAt(b, 0)
		if err != nil && err != io.EOF {
			t.Fatalf("read: %v", err)
		}
		return string(b[:n])
	}
	for _, r := range reasonRows {
		f, err := fs.Open("/tmux", plan9.ORDWR)
		if err != nil {
			t.Fatal(err)
		}
		other, err := fs.Open("/tmux", plan9.OREAD)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt([]byte(r.value), 0)
		if want := r.kind + ": " + strings.TrimSuffix(r.reason, "\n"); err == nil || err.Error() != want {
			t.Errorf("%s: Rerror %v, want %q", r.value, err, want)
		}
		if got := read(f); got != r.reason {
			t.Errorf("%s: the writing fid reads %q, want %q", r.value, got, r.reason)
		}
		if got := read(other); got != hostContent {
			t.Errorf("%s: another fid reads %q", r.value, got)
		}
		f.Close()
		other.Close()
	}
	// Write-only still works as before.
	f, err := fs.Open("/tmux", plan9.OWRITE|plan9.OTRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("ok")); err != nil {
		t.Errorf("write-only: %v", err)
	}
	f.Close()
}

// The reason line is bounded, one line, and says refused or failed.
func TestReasonOf(t *testing.T) {
	rows := []struct {
		err  error
		want string
	}{
		{errs.E("move", errs.Permission, "n", errors.New("moves are off")), "refused: moves are off\n"},
		{errs.E("move", errs.IO, "n", errors.New("x")), "failed: x\n"}, // unmarked IO: failed, never "nothing changed"
		{notStopped{errs.E("move", errs.IO, "n", errors.New("x"))}, "refused: x\n"},
		{errors.New("plain\r\nerror"), "refused: plain error\n"},
		{errs.E("move", errs.Busy, "", nil), "refused: busy\n"},
	}
	for _, r := range rows {
		if got := string(reasonOf(r.err)); got != r.want {
			t.Errorf("reasonOf(%v) = %q, want %q", r.err, got, r.want)
		}
	}
	long := string(reasonOf(errors.New(strings.Repeat("é", 10000))))
	if len(long) > maxReason || !strings.HasSuffix(long, "\n") || strings.Count(long, "\n") != 1 {
		t.Errorf("a long reason is %d bytes", len(long))
	}
}
