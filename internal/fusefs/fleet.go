package fusefs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/9harness/9harness/internal/client"
)

// Host is one machine of a fleet mount: the name of its directory and how
// to reach its daemon (a local socket, or ssh running the relay).
type Host struct {
	Name string
	// Dial connects, and gives up when ctx ends (a dial waited for no
	// longer leaves no ssh behind; ctx bounds the dial, and ends after
	// it, not the connection's life); abort ends the connection's
	// transport at once (it closes the socket, or ends ssh), which fails
	// every request in flight. Client.Close alone would wait for a hung
	// host to answer the clunk of its root.
	Dial func(ctx context.Context) (c *client.Client, abort func(), err error)
}

// DefaultDialLimit is how long a fleet host's dial is waited for when the
// probe's timeout is shorter: ssh's connecting and login and the relay's
// start take longer than a probe's answer on a slow link or a loaded
// machine, and a host that answers late should still appear.
func DefaultDialLimit(timeout time.Duration) time.Duration {
	return max(30*time.Second, timeout)
}

// FleetOptions tune a fleet mount.
type FleetOptions struct {
	// Source names the mount in the mount table: "9harness:" + Source.
	Source string
	// Timeout bounds a host's answer to the liveness probe; a host that
	// takes longer is dropped, and the requests waiting on it fail. A
	// host whose first dial takes longer is reported as not answering
	// (FirstDials). Zero is 5 s.
	Timeout time.Duration
	// DialLimit bounds a dial: ssh's connecting and login, the relay's
	// start and the 9P handshake, which on a slow link or a loaded
	// machine take longer than a probe's answer. A dial that answers
	// after Timeout but within DialLimit is kept. Zero is
	// DefaultDialLimit(Timeout).
	DialLimit time.Duration
	// Probe is how often a connected host is asked whether it is still
	// there. Zero is 2 s.
	Probe time.Duration
	// MaxBackoff caps the wait between dials of a host that does not
	// answer (it starts at Probe and doubles). Zero is 10 s.
	MaxBackoff time.Duration
	// Debug logs every FUSE request on the standard logger.
	Debug bool
	// Logf, if set, is told when a host comes and goes.
	Logf func(format string, args ...any)
}

// Fleet is a mounted fleet: a directory of hosts, each the root of its
// daemon's tree while it answers.
type Fleet struct {
	Server *fuse.Server
	stop   chan struct{}
	wg     sync.WaitGroup

	first   sync.WaitGroup // each host's first dial, done or failed
	firstMu sync.Mutex
	failed  map[string]error // the hosts whose first dial failed, and why
}

// FirstDials waits until every host has answered its first dial, failed
// it, or taken longer than the options' Timeout, and returns the hosts
// that did not answer by then, each with its error; a host that answers
// later still appears in the directory.
func (f *Fleet) FirstDials() map[string]error {
	f.first.Wait()
	f.firstMu.Lock()
	defer f.firstMu.Unlock()
	return maps.Clone(f.failed)
}

// Wait waits until the mount is unmounted.
func (f *Fleet) Wait() { f.Server.Wait() }

// Unmount unmounts it.
func (f *Fleet) Unmount() error { return f.Server.Unmount() }

// Close stops dialing and drops every host's connection. Call it once the
// server has stopped (after Wait or a successful Unmount).
func (f *Fleet) Close() {
	close(f.stop)
	f.wg.Wait()
}

// MountFleet mounts a directory holding one directory per host, each a
// host's tree served over its own 9P connection. A host appears once it
// answers, disappears when its connection fails or its probe goes
// unanswered for opts.Timeout, and comes back when a later dial succeeds:
// each host has a loop that dials it with a bounded backoff. A request on
// a host that has gone answers EIO. The mount is the caller's alone.
func MountFleet(dir string, hosts []Host, opts FleetOptions) (*Fleet, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.DialLimit <= 0 {
		opts.DialLimit = DefaultDialLimit(opts.Timeout)
	}
	opts.DialLimit = max(opts.DialLimit, opts.Timeout)
	if opts.Probe <= 0 {
		opts.Probe = 2 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	root := &fleetRoot{}
	srv, err := fs.Mount(dir, root, mountOptions(opts.Source, opts.Debug))
	if err != nil {
		return nil, err
	}
	f := &Fleet{Server: srv, stop: make(chan struct{}), failed: map[string]error{}}
	for _, h := range hosts {
		f.wg.Add(1)
		f.first.Add(1)
		var once sync.Once
		dialed := func(err error) {
			once.Do(func() {
				if err != nil {
					f.firstMu.Lock()
					f.failed[h.Name] = err
					f.firstMu.Unlock()
				}
				f.first.Done()
			})
		}
		go func() {
			defer f.wg.Done()
			defer dialed(errStopped)
			root.serveHost(h, opts, f.stop, dialed)
		}()
	}
	return f, nil
}

// fleetRoot is the fleet's top directory: its children are the hosts that
// answer now.
type fleetRoot struct {
	fs.Inode
	inos atomic.Uint64 // the last inode number given
	mu   sync.Mutex    // serializes adding and removing hosts
}

var (
	_ fs.NodeLookuper  = (*fleetRoot)(nil)
	_ fs.NodeReaddirer = (*fleetRoot)(nil)
	_ fs.NodeGetattrer = (*fleetRoot)(nil)
)

func (r *fleetRoot) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o555
	out.Nlink = 2
	out.Uid = uint32(syscall.Getuid())
	out.Gid = uint32(syscall.Getgid())
	return 0
}

// Lookup finds a host that answers now; its attributes are its daemon's
// root's.
func (r *fleetRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch := r.GetChild(name)
	if ch == nil {
		return nil, syscall.ENOENT
	}
	n := ch.Operations().(*node)
	q, a, errno := n.attr()
	if errno != 0 {
		return nil, errno
	}
	n.m.fill(&out.Attr, q, a)
	return ch, 0
}

// Readdir lists the hosts that answer now, by name.
func (r *fleetRoot) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	kids := r.Children()
	names := make([]string, 0, len(kids))
	for name := range kids {
		names = append(names, name)
	}
	slices.Sort(names)
	out := []fuse.DirEntry{{Name: ".", Ino: 1, Mode: syscall.S_IFDIR}, {Name: "..", Ino: 1, Mode: syscall.S_IFDIR}}
	for _, name := range names {
		out = append(out, fuse.DirEntry{Name: name, Ino: kids[name].StableAttr().Ino, Mode: syscall.S_IFDIR})
	}
	return fs.NewListDirStream(out), 0
}

// serveHost keeps one host in the directory while it answers: dial, add,
// probe until it fails, remove, and dial again after a backoff that
// doubles up to opts.MaxBackoff. Each connection is a new generation of
// inode numbers, so that the kernel never takes a new connection's file
// for an old one's.
// dialed is told the outcome of each dial (nil: the host is in the
// directory).
func (r *fleetRoot) serveHost(h Host, opts FleetOptions, stop <-chan struct{}, dialed func(error)) {
	backoff := opts.Probe
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-stop:
			return false
		case <-t.C:
			return true
		}
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		late := func(err error) {
			dialed(err)
			opts.Logf("%s: %v; still dialing", h.Name, err)
		}
		c, abort, err := dialWithin(h.Dial, opts.Timeout, opts.DialLimit, late, stop)
		if errors.Is(err, errStopped) {
			return
		}
		if err != nil {
			dialed(err)
			opts.Logf("%s: %v", h.Name, err)
			if !wait(backoff) {
				return
			}
			backoff = min(2*backoff, opts.MaxBackoff)
			continue
		}
		lost := make(chan error, 1)
		m := &mount{
			onLost: func(err error) {
				select {
				case lost <- err:
				default:
				}
			},
			inos: newInoMap(&r.inos),
		}
		ch, err := r.add(h.Name, c, m)
		dialed(err)
		if err != nil {
			opts.Logf("%s: %v", h.Name, err)
			go hangUp(c, abort)
			if !wait(backoff) {
				return
			}
			backoff = min(2*backoff, opts.MaxBackoff)
			continue
		}
		opts.Logf("%s: connected", h.Name)
		backoff = opts.Probe
		err = probe(c, opts, lost, stop)
		r.remove(h.Name, ch)
		// Hanging up fails every request still waiting on this host.
		go hangUp(c, abort)
		if err == nil { // stopped
			return
		}
		opts.Logf("%s: lost: %v", h.Name, err)
		if !wait(opts.Probe) {
			return
		}
	}
}

// hangUp ends a connection: its transport first, so that the session's
// own close (which clunks its root) does not wait on a hung host.
func hangUp(c *client.Client, abort func()) {
	abort()
	c.Close()
}

// dialWithin dials. A dial still going after timeout is reported to late
// and waited for up to limit in all: a slow host is slow to set up, not
// gone, and a dial given up at the probe's bound would be given up every
// time. A dial given up on (at limit, or at stop) is cancelled, and hung
// up if it answers all the same.
func dialWithin(dial func(context.Context) (*client.Client, func(), error), timeout, limit time.Duration, late func(error), stop <-chan struct{}) (*client.Client, func(), error) {
	type result struct {
		c     *client.Client
		abort func()
		err   error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() {
		c, abort, err := dial(ctx)
		done <- result{c, abort, err}
	}()
	giveUp := func(err error) (*client.Client, func(), error) {
		go func() {
			if r := <-done; r.err == nil {
				hangUp(r.c, r.abort)
			}
		}()
		return nil, nil, err
	}
	// await is the dial's result, or why it was not waited for: d
	// passed, or stop came.
	await := func(d time.Duration) (result, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case r := <-done:
			return r, nil
		case <-stop:
			return result{}, errStopped
		case <-t.C:
			return result{}, errTimeout(d)
		}
	}
	r, err := await(timeout)
	if errors.Is(err, errTimeout(timeout)) && limit > timeout {
		late(err)
		r, err = await(limit - timeout)
		if err != nil && err != errStopped {
			err = errTimeout(limit)
		}
	}
	if err != nil {
		return giveUp(err)
	}
	return r.c, r.abort, r.err
}

// errStopped is a host's first dial when the mount stopped before it.
var errStopped = errors.New("the mount stopped")

type errTimeout time.Duration

func (e errTimeout) Error() string { return "no answer within " + time.Duration(e).String() }

// probe asks the host for its root's attributes every opts.Probe until a
// request fails, one goes unanswered for opts.Timeout, or stop; nil means
// stop.
func probe(c *client.Client, opts FleetOptions, lost <-chan error, stop <-chan struct{}) error {
	tick := time.NewTicker(opts.Probe)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case err := <-lost:
			return err
		case <-tick.C:
		}
		done := make(chan error, 1)
		go func() {
			_, _, err := c.Stat("/")
			done <- err
		}()
		t := time.NewTimer(opts.Timeout)
		select {
		case err := <-done:
			t.Stop()
			if err != nil && !client.IsWireErrno(err) {
				return err
			}
		case <-t.C:
			return errTimeout(opts.Timeout)
		case <-stop:
			t.Stop()
			return nil
		}
	}
}

// add puts a host's tree in the directory under its name.
func (r *fleetRoot) add(name string, c *client.Client, m *mount) (*fs.Inode, error) {
	rootFid, q, err := walkRoot(c)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.NewInode(context.Background(), &node{m: m, f: rootFid}, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: m.ino(q.Path)})
	r.AddChild(name, ch, true)
	// The kernel may remember that the name was not there.
	go r.NotifyEntry(name)
	return ch, nil
}

// remove takes a host's tree out of the directory; the kernel forgets it
// now rather than at the end of its entry's lifetime.
func (r *fleetRoot) remove(name string, ch *fs.Inode) {
	r.mu.Lock()
	if r.GetChild(name) == ch {
		r.RmChild(name)
	}
	r.mu.Unlock()
	go r.NotifyEntry(name)
}

// inoMap numbers one connection's files: its own number for each qid
// path, from a counter the whole mount shares, so that no two hosts (nor
// two connections to one host) share an inode number. It goes with the
// connection.
type inoMap struct {
	next *atomic.Uint64
	mu   sync.Mutex
	m    map[uint64]uint64
}

func newInoMap(next *atomic.Uint64) *inoMap {
	return &inoMap{next: next, m: map[uint64]uint64{}}
}

func (im *inoMap) get(p uint64) uint64 {
	im.mu.Lock()
	defer im.mu.Unlock()
	ino, ok := im.m[p]
	if !ok {
		ino = im.next.Add(1) + 1 // from 2: 1 is the mount's root
		im.m[p] = ino
	}
	return ino
}
