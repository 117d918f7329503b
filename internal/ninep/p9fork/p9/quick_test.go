package p9_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hugelgupf/p9/fsimpl/templatefs"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// quickFS is a root holding "gate", whose GetAttr, once armed, waits until
// release is closed (the root's too, once rootArm is set); every File of
// it answers Quick with quick, and the Attacher QuickAttach.
type quickFS struct {
	quick   bool
	armed   atomic.Bool
	rootArm atomic.Bool // the root's GetAttr waits too
	entered chan struct{}
	release chan struct{}
}

func (fs *quickFS) Attach() (p9.File, error) { return &quickNode{fs: fs, name: "/"}, nil }

func (fs *quickFS) QuickAttach() bool { return fs.quick }

type quickNode struct {
	templatefs.NoopFile
	fs   *quickFS
	name string
}

func (n *quickNode) Quick([]string) bool { return n.fs.quick }

func (n *quickNode) Walk(names []string) ([]p9.QID, p9.File, error) {
	if len(names) == 0 {
		return nil, &quickNode{fs: n.fs, name: n.name}, nil
	}
	if n.name != "/" || len(names) != 1 || names[0] != "gate" {
		return nil, nil, linux.ENOENT
	}
	return []p9.QID{{Type: p9.TypeRegular, Path: 2}}, &quickNode{fs: n.fs, name: "gate"}, nil
}

func (n *quickNode) GetAttr(p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	if n.name == "gate" && n.fs.armed.Load() || n.name == "/" && n.fs.rootArm.Load() {
		n.fs.entered <- struct{}{}
		<-n.fs.release
		if n.name == "/" {
			return p9.QID{Type: p9.TypeDir, Path: 1}, p9.AttrMask{Mode: true}, p9.Attr{Mode: p9.ModeDirectory | 0o555}, nil
		}
		return p9.QID{Type: p9.TypeRegular, Path: 2}, p9.AttrMask{Mode: true}, p9.Attr{Mode: p9.ModeRegular | 0o444}, nil
	}
	return p9.QID{Type: p9.TypeDir, Path: 1}, p9.AttrMask{Mode: true}, p9.Attr{Mode: p9.ModeDirectory | 0o555}, nil
}

// A Tgetattr of a File that calls itself quick is served where the
// connection is read: while it runs, the next request is not read (its
// reply waits); a File that is not quick has its Tgetattr served on its
// own, and the next request is answered meanwhile.
func TestQuickFileInline(t *testing.T) {
	for _, quick := range []bool{true, false} {
		fs := &quickFS{quick: quick, entered: make(chan struct{}, 1), release: make(chan struct{})}
		r := serve(t, fs)
		r.session(8192)
		r.send(tTwalk, 2, uint32(0), uint32(5), uint16(1), "gate")
		r.expect(tRwalk, 2)
		fs.armed.Store(true)
		r.send(tTgetattr, 10, uint32(5), uint64(0x7ff))
		select {
		case <-fs.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("quick=%v: the gate's Tgetattr never started", quick)
		}
		r.send(tTgetattr, 11, uint32(0), uint64(0x7ff))
		if quick {
			r.expectNothing(200 * time.Millisecond)
			close(fs.release)
			r.expect(tRgetattr, 10)
			r.expect(tRgetattr, 11)
		} else {
			r.expect(tRgetattr, 11)
			close(fs.release)
			r.expect(tRgetattr, 10)
		}
	}
}

// A Tattach of the root, from an Attacher that calls itself quick, is
// served where the connection is read, as a quick Tgetattr is; a Tattach
// with a path to walk, or from an Attacher that is not quick, is served on
// its own, and the next request is answered meanwhile.
func TestQuickAttachInline(t *testing.T) {
	for _, tc := range []struct {
		quick  bool
		aname  string
		inline bool
	}{
		{true, "", true},
		{true, "/", true},
		{true, "/gate", false},
		{false, "", false},
	} {
		fs := &quickFS{quick: tc.quick, entered: make(chan struct{}, 1), release: make(chan struct{})}
		r := serve(t, fs)
		r.version(8192)
		fs.rootArm.Store(true)
		fs.armed.Store(true)
		r.send(tTattach, 1, uint32(0), noFID, "u", tc.aname, uint32(0))
		select {
		case <-fs.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%+v: the Tattach's GetAttr never started", tc)
		}
		r.send(tTclunk, 2, uint32(7)) // no such fid: answered at once
		if tc.inline {
			r.expectNothing(200 * time.Millisecond)
			close(fs.release)
			r.expect(tRattach, 1)
			r.expectErr(2, linux.EBADF)
		} else {
			r.expectErr(2, linux.EBADF)
			close(fs.release)
			r.expect(tRattach, 1)
		}
	}
}
