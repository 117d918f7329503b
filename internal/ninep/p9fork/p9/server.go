// Copyright 2018 The gVisor Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package p9

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hugelgupf/p9/linux"
	"github.com/u-root/uio/ulog"
)

// Server is a 9p2000.L server.
type Server struct {
	// attacher provides the attach function.
	attacher Attacher

	// pathTree is the full set of paths opened on this server.
	//
	// These may be across different connections, but rename operations
	// must be serialized globally for safely. There is a single pathTree
	// for the entire server, and not per connection.
	pathTree *pathNode

	// renameMu is a global lock protecting rename operations. With this
	// lock, we can be certain that any given rename operation can safely
	// acquire two path nodes in any order, as all other concurrent
	// operations acquire at most a single node.
	renameMu sync.RWMutex

	// log is a logger to log to, if specified.
	log ulog.Logger

	// authErr, if not nil, answers every Tauth (WithAuthError).
	authErr error

	// maxMsize, if not 0, caps the msize a Tversion is granted
	// (WithMaxMessageSize).
	maxMsize uint32

	// noXattrs refuses Txattrwalk and Txattrcreate (WithoutXattrs).
	noXattrs bool

	// maxFIDs, if not 0, is how many fids one connection may hold
	// (WithMaxFIDs).
	maxFIDs int

	// readCharge and readRelease, if set, account for each Tread's
	// buffer while it is held (WithReadBuffers).
	readCharge  func(n int64) error
	readRelease func(n int64)

	// ctx is the parent of every connection's context (WithContext).
	ctx context.Context

	// maxRequests and maxBlocking bound the requests of a connection
	// in flight, and its blocking reads (bounds.go).
	maxRequests int
	maxBlocking int

	// readTimeout, writeTimeout and idleTimeout bound stalls (stall.go).
	readTimeout  time.Duration
	writeTimeout time.Duration
	idleTimeout  time.Duration
}

// ServerOpt is an optional config for a new server.
type ServerOpt func(s *Server)

// WithServerLogger overrides the default logger for the server.
func WithServerLogger(l ulog.Logger) ServerOpt {
	return func(s *Server) {
		s.log = l
	}
}

// WithAuthError makes the server answer every Tauth with err (an
// Rlerror of its errno) instead of ENOSYS. diod's client library
// (libnpclient: diodls, diodcat, ...) takes only success or ENOENT to mean
// "no authentication required", so it needs linux.ENOENT here.
func WithAuthError(err error) ServerOpt {
	return func(s *Server) {
		s.authErr = err
	}
}

// WithMaxMessageSize caps the msize granted to a client below the
// library's own 4 MiB ceiling. A server sizes what it reads and writes by
// msize, so this is the bound on the memory one request can make it hold.
func WithMaxMessageSize(msize uint32) ServerOpt {
	return func(s *Server) {
		s.maxMsize = msize
	}
}

// WithoutXattrs makes the server refuse Txattrwalk and Txattrcreate at
// once with EOPNOTSUPP, without calling the File. Why: the server buffers
// an xattr value in memory until the fid is clunked, up to the size the
// client announces in Txattrcreate (any 64-bit number), and a Txattrwalk
// holds the whole value or listing; a server whose files have no extended
// attributes need not let a client make it hold either.
func WithoutXattrs() ServerOpt {
	return func(s *Server) {
		s.noXattrs = true
	}
}

// WithMaxFIDs bounds the fids of one connection: a Tattach, Twalk or
// Txattrwalk that would create a fid beyond n is answered EMFILE before any
// File method runs. Reusing a fid the connection holds is always allowed.
// Why: every fid holds a File and its walk's parents until it is clunked,
// and nothing else bounds how many a client creates (200,000 Twalks took a
// server from 128 MB to 1.65 GB in 9 s).
func WithMaxFIDs(n int) ServerOpt {
	return func(s *Server) {
		s.maxFIDs = n
	}
}

// WithReadBuffers has each Tread's buffer (count bytes, taken from the
// pools of fastpath.go when the read is not spliced) charged to charge
// before it is taken, and released to release once the reply has been
// written, or the read has failed. A charge that fails answers the Tread
// ENOMEM. Why: a buffer is held from before the read until its reply is
// taken by the client, which a client that pipelines Treads and reads no
// reply makes as long as the write timeout, for lRequests buffers of up to
// msize per connection; and a read that waits for an event holds its
// buffer while it waits. The charge lets the server hold them against a
// byte budget that counts everything else a peer makes it hold.
func WithReadBuffers(charge func(n int64) error, release func(n int64)) ServerOpt {
	return func(s *Server) {
		s.readCharge, s.readRelease = charge, release
	}
}

// NewServer returns a new server.
func NewServer(attacher Attacher, o ...ServerOpt) *Server {
	s := &Server{
		attacher: attacher,
		pathTree: newPathNode(),
		log:      ulog.Null,
	}
	for _, opt := range o {
		opt(s)
	}
	return s
}

// connState is the state for a single connection.
type connState struct {
	// server is the backing server.
	server *Server

	// fids is the set of active fids.
	//
	// This is used to find fids for files.
	fidMu sync.Mutex
	fids  map[fid]*fidRef

	// tags is the set of active tags: requests read whose reply has not
	// been written yet.
	tagMu sync.Mutex
	tags  map[tag]*tagState

	// opening holds the fids whose set-up (Tattach, Twalk, Tlopen, ...)
	// is in flight (opening.go). Protected by tagMu.
	opening map[fid]chan struct{}

	// messageSize is the maximum message size. The server does not
	// do automatic splitting of messages.
	messageSize uint32

	// splice moves Tread data from host files to the socket (fastpath.go).
	splice splicer

	// baseVersion is the version of 9P protocol.
	baseVersion baseVersion

	// version is the agreed upon version X of 9P2000.L.Google.X.
	// version 0 implies 9P2000.L.
	version uint32

	// pendingWg counts requests that are still being handled.
	pendingWg sync.WaitGroup

	// ctx is the parent of the connection's requests' contexts. It is
	// cancelled when reading requests ends (the client hung up, or the
	// connection failed), so that no handler waits for a client that is
	// gone: Handle returns only once every handler has.
	ctx    context.Context
	cancel context.CancelFunc

	// slots and blocking are the semaphores of WithMaxRequests and
	// WithMaxBlockingReads; nil when unbounded.
	slots    chan struct{}
	blocking chan struct{}

	// in is what requests are read from: t, under the stall bounds
	// (stall.go).
	in io.Reader

	// activeAt is when a frame or a reply last went by (UnixNano).
	activeAt int64

	// closeOnce closes t once when a reply fails (fail).
	closeOnce sync.Once

	// sendMu serializes sending to r, and clearing a tag with it.
	sendMu sync.Mutex

	// t reads T messages and r write R messages
	t io.ReadCloser
	r io.WriteCloser
}

// xattrOp is the xattr related operations, walk or create.
type xattrOp int

const (
	xattrNone   = 0
	xattrCreate = 1
	xattrWalk   = 2
)

type pendingXattr struct {
	// the pending xattr-related operation
	op xattrOp

	// name is the attribute.
	name string

	// size of the attribute value, represents the
	// length of the attribute value that is going to write to or read from a file.
	size uint64

	// flags associated with a txattrcreate message.
	// generally Linux setxattr(2) flags.
	flags XattrFlags

	// saved up xattr operation value (for reads, listed / gotten buffer --
	// ready for chunking; for writes, this is used to accumulate chunked
	// values until a Tclunk actuates the operation)
	buf []byte
}

// fidRef wraps a node and tracks references.
type fidRef struct {
	// server is the associated server.
	server *Server

	// file is the associated File.
	file File

	// pendingXattr is the xattr-related operations that are going to be done
	// in a tread or twrite request.
	pendingXattr pendingXattr

	// refs is an active refence count.
	//
	// The node above will be closed only when refs reaches zero.
	refs int64

	// opened indicates whether this has been opened already.
	//
	// This is updated in handlers.go.
	//
	// opened is protected by pathNode.opMu or renameMu (for write).
	opened bool

	// mode is the fidRef's mode from the walk. Only the type bits are
	// valid, the permissions may change. This is used to sanity check
	// operations on this element, and prevent walks across
	// non-directories.
	mode FileMode

	// openFlags is the mode used in the open.
	//
	// This is updated in handlers.go.
	//
	// opened is protected by pathNode.opMu or renameMu (for write).
	openFlags OpenFlags

	// pathNode is the current pathNode for this fid.
	pathNode *pathNode

	// parent is the parent fidRef. We hold on to a parent reference to
	// ensure that hooks, such as Renamed, can be executed safely by the
	// server code.
	//
	// Note that parent cannot be changed without holding both the global
	// rename lock and a writable lock on the associated pathNode for this
	// fidRef. Holding either of these locks is sufficient to examine
	// parent safely.
	//
	// The parent will be nil for root fidRefs and pending xattrwalk/create
	// fidRefs, and non-nil otherwise. The method maybeParent can be used
	// to return a cyclical reference, and hasParent should be used to
	// check for root over looking at parent directly.
	parent *fidRef
}

// IncRef increases the references on a fid.
func (f *fidRef) IncRef() {
	atomic.AddInt64(&f.refs, 1)
}

// DecRef should be called when you're finished with a fid.
func (f *fidRef) DecRef() error {
	if atomic.AddInt64(&f.refs, -1) == 0 {
		var (
			errs []error
			err  = f.file.Close()
		)
		if err != nil {
			err = fmt.Errorf("file: %w", err)
			errs = append(errs, err)
		}

		// Drop the parent reference.
		//
		// Since this fidRef is guaranteed to be non-discoverable when
		// the references reach zero, we don't need to worry about
		// clearing the parent.
		if f.parent != nil {
			// If we've been previously deleted, removing this
			// ref is a no-op. That's expected.
			f.parent.pathNode.removeChild(f)
			if pErr := f.parent.DecRef(); pErr != nil {
				pErr = fmt.Errorf("parent: %w", pErr)
				errs = append(errs, pErr)
			}
		}
		return errors.Join(errs...)
	}
	return nil
}

// TryIncRef returns true if a new reference is taken on the fid, and false if
// the fid has been destroyed.
func (f *fidRef) TryIncRef() bool {
	for {
		r := atomic.LoadInt64(&f.refs)
		if r <= 0 {
			return false
		}
		if atomic.CompareAndSwapInt64(&f.refs, r, r+1) {
			return true
		}
	}
}

// isDeleted returns true if this fidRef has been deleted.
//
// Precondition: this must be called via safelyRead, safelyWrite or
// safelyGlobal.
func (f *fidRef) isDeleted() bool {
	return atomic.LoadUint32(&f.pathNode.deleted) != 0
}

// hasParent indicates whether this is a root fid.
func (f *fidRef) hasParent() bool {
	return f.parent == nil
}

// maybeParent returns a cyclic reference for roots, and the parent otherwise.
func (f *fidRef) maybeParent() *fidRef {
	if f.parent != nil {
		return f.parent
	}
	return f // Root has itself.
}

// notifyDelete marks all fidRefs as deleted.
//
// Precondition: this must be called via safelyWrite or safelyGlobal.
func notifyDelete(pn *pathNode) {
	atomic.StoreUint32(&pn.deleted, 1)

	// Call on all subtrees.
	pn.forEachChildNode(func(pn *pathNode) {
		notifyDelete(pn)
	})
}

// markChildDeleted marks all children below the given name as deleted.
//
// Precondition: this must be called via safelyWrite or safelyGlobal.
func (f *fidRef) markChildDeleted(name string) {
	if origPathNode := f.pathNode.removeWithName(name, nil); origPathNode != nil {
		// Mark all children as deleted.
		notifyDelete(origPathNode)
	}
}

// notifyNameChange calls the relevant Renamed method on all nodes in the path,
// recursively. Note that this applies only for subtrees, as these
// notifications do not apply to the actual file whose name has changed.
//
// Precondition: this must be called via safelyGlobal.
func notifyNameChange(pn *pathNode) {
	// Call on all local references.
	pn.forEachChildRef(func(ref *fidRef, name string) {
		ref.file.Renamed(ref.parent.file, name)
	})

	// Call on all subtrees.
	pn.forEachChildNode(func(pn *pathNode) {
		notifyNameChange(pn)
	})
}

// renameChildTo renames the given child to the target.
//
// Precondition: this must be called via safelyGlobal.
func (f *fidRef) renameChildTo(oldName string, target *fidRef, newName string) {
	target.markChildDeleted(newName)
	origPathNode := f.pathNode.removeWithName(oldName, func(ref *fidRef) {
		// N.B. DecRef can take f.pathNode's parent's childMu. This is
		// allowed because renameMu is held for write via safelyGlobal.
		ref.parent.DecRef() // Drop original reference.
		ref.parent = target // Change parent.
		ref.parent.IncRef() // Acquire new one.
		if f.pathNode == target.pathNode {
			target.pathNode.addChildLocked(ref, newName)
		} else {
			target.pathNode.addChild(ref, newName)
		}
		ref.file.Renamed(target.file, newName)
	})

	if origPathNode != nil {
		// Replace the previous (now deleted) path node.
		target.pathNode.addPathNodeFor(newName, origPathNode)
		// Call Renamed on all children.
		notifyNameChange(origPathNode)
	}
}

// safelyRead executes the given operation with the local path node locked.
// This implies that paths will not change during the operation.
func (f *fidRef) safelyRead(fn func() error) (err error) {
	f.server.renameMu.RLock()
	defer f.server.renameMu.RUnlock()
	f.pathNode.opMu.RLock()
	defer f.pathNode.opMu.RUnlock()
	return fn()
}

// safelyWrite executes the given operation with the local path node locked in
// a writable fashion. This implies some paths may change.
func (f *fidRef) safelyWrite(fn func() error) (err error) {
	f.server.renameMu.RLock()
	defer f.server.renameMu.RUnlock()
	f.pathNode.opMu.Lock()
	defer f.pathNode.opMu.Unlock()
	return fn()
}

// safelyGlobal executes the given operation with the global path lock held.
func (f *fidRef) safelyGlobal(fn func() error) (err error) {
	f.server.renameMu.Lock()
	defer f.server.renameMu.Unlock()
	return fn()
}

// Lookupfid finds the given fid.
//
// You should call fid.DecRef when you are finished using the fid.
func (cs *connState) LookupFID(fid fid) (*fidRef, bool) {
	cs.fidMu.Lock()
	defer cs.fidMu.Unlock()
	fidRef, ok := cs.fids[fid]
	if ok {
		fidRef.IncRef()
		return fidRef, true
	}
	return nil, false
}

// Insertfid installs the given fid.
//
// This fid starts with a reference count of one. If a fid exists in
// the slot already it is closed, per the specification.
func (cs *connState) InsertFID(fid fid, newRef *fidRef) {
	cs.fidMu.Lock()
	defer cs.fidMu.Unlock()
	origRef, ok := cs.fids[fid]
	if ok {
		defer origRef.DecRef()
	}
	newRef.IncRef()
	cs.fids[fid] = newRef
}

// resetSession clunks every fid of the connection, as a Tversion does.
// Requests in flight keep the references they hold, so a File is closed
// once the last of them is done with it.
func (cs *connState) resetSession() {
	// "All outstanding I/O on the connection is aborted": the requests
	// in flight are cancelled (the reads among them return at once), and
	// their replies are not written: the client's new session could take
	// one for the reply to a request of its own under the same tag. The
	// Tversion is answered once they have all returned, so that none
	// makes a fid after the fids are freed.
	var sent []chan struct{}
	cs.tagMu.Lock()
	for _, st := range cs.tags {
		if st.version {
			continue
		}
		st.aborted.Store(true)
		if st.cancel != nil {
			st.cancel()
		}
		sent = append(sent, st.sent)
	}
	cs.tagMu.Unlock()
	for _, ch := range sent {
		select {
		case <-ch:
		case <-cs.ctx.Done():
		}
	}

	cs.fidMu.Lock()
	old := cs.fids
	cs.fids = make(map[fid]*fidRef)
	cs.fidMu.Unlock()
	for _, ref := range old {
		ref.DecRef()
	}
}

// fidRoom reports EMFILE if installing fid would take the connection past
// its fid bound. Requests run concurrently, so the bound may be overshot by
// the requests in flight at once, never more.
func (cs *connState) fidRoom(fid fid) error {
	max := cs.server.maxFIDs
	if max <= 0 {
		return nil
	}
	cs.fidMu.Lock()
	defer cs.fidMu.Unlock()
	if _, ok := cs.fids[fid]; !ok && len(cs.fids) >= max {
		return linux.EMFILE
	}
	return nil
}

// Deletefid removes the given fid.
//
// This simply removes it from the map and drops a reference.
func (cs *connState) DeleteFID(fid fid) error {
	cs.fidMu.Lock()
	defer cs.fidMu.Unlock()
	fidRef, ok := cs.fids[fid]
	if !ok {
		return linux.EBADF
	}
	delete(cs.fids, fid)
	return fidRef.DecRef()
}

// tagState is a request in flight.
type tagState struct {
	// sent is closed once the request's reply has been written (or
	// has failed to be).
	sent chan struct{}

	// cancel cancels the request's context; nil for requests that
	// have none (only Tread has one).
	cancel context.CancelFunc

	// slot is the semaphore whose slot the request holds until its
	// reply is written (bounds.go); refuse, if not nil, is its answer.
	slot   chan struct{}
	refuse error

	// after, if not nil, is closed when the set-up of the request's fid
	// (a Twalk, Tlopen, ... read before it) is done; opening is closed
	// when this request, a set-up of openFid, is (opening.go).
	after   chan struct{}
	opening chan struct{}
	openFid fid

	// version marks a Tversion's tag; aborted, a request a Tversion has
	// ended the session of: its reply is not written (resetSession).
	version bool
	aborted atomic.Bool
}

// StartTag starts handling the tag.
//
// False is returned if this tag is already active.
func (cs *connState) StartTag(t tag, m message) (*tagState, bool) {
	cs.tagMu.Lock()
	defer cs.tagMu.Unlock()
	if _, ok := cs.tags[t]; ok {
		return nil, false
	}
	st := &tagState{sent: make(chan struct{})}
	_, st.version = m.(*tversion)
	if r, ok := m.(*tread); ok {
		// Only reads may wait (ReaderAtContext), so only they pay
		// for a context of their own. Set under tagMu, where
		// resetSession reads it.
		r.ctx, st.cancel = context.WithCancel(cs.ctx)
	}
	cs.tags[t] = st
	return st, true
}

// lookupTag returns the request in flight under t, or nil.
func (cs *connState) lookupTag(t tag) *tagState {
	cs.tagMu.Lock()
	defer cs.tagMu.Unlock()
	return cs.tags[t]
}

// ClearTag finishes handling a tag. It is called under sendMu, just before
// the tag's reply is written: the client may reuse the tag as soon as it
// reads the reply, and a Tflush read from now on finds the tag gone and is
// answered at once, with an Rflush that sendMu orders after this reply.
func (cs *connState) ClearTag(t tag) {
	cs.tagMu.Lock()
	defer cs.tagMu.Unlock()
	if _, ok := cs.tags[t]; !ok {
		// Should never happen.
		panic("unused tag cleared")
	}
	delete(cs.tags, t)
}

// handleRequests reads the connection's requests, one after the other, and
// runs each in a goroutine of its own, until the connection fails.
//
// Every request is registered (StartTag) here, in the order the client sent
// them, before any handler runs: a Tflush then always finds the request it
// names if that request came before it and is not answered yet, and waits
// for that reply (see tflush.handle). Its oldtag is looked up before its own
// tag is started, so a Tflush naming itself finds nothing to wait for.
func (cs *connState) handleRequests() {
	for {
		// A request is read only when it can be handled: beyond the
		// bound, frames stay on the socket.
		acquire(cs.slots)

		messageSize := atomic.LoadUint32(&cs.messageSize)
		if messageSize == 0 {
			// Default or not yet negotiated: no frame can be larger
			// than the largest msize the server grants.
			messageSize = maximumLength
			if max := cs.server.maxMsize; max != 0 && max < messageSize {
				messageSize = max
			}
		}

		startFrame(cs.in)
		tag, m, err := recv(cs.server.log, cs.in, messageSize, msgDotLRegistry.get)
		if errSocket, ok := err.(ConnError); ok {
			if errSocket.error != io.EOF {
				// Connection problem; stop serving.
				cs.server.log.Printf("p9.recv: %v", errSocket.error)
			}
			release(cs.slots)
			return
		}
		if err != nil {
			// Not a connection error but some other protocol error:
			// answer it at once.
			perr := err
			cs.sendMu.Lock()
			cs.writeDeadline()
			err := send(cs.server.log, cs.r, tag, newErr(perr))
			cs.sendMu.Unlock()
			release(cs.slots)
			if err != nil {
				cs.server.log.Printf("p9.send: %v", err)
				cs.fail()
			}
			if errors.Is(perr, ErrNoValidMessage) {
				// The frame could not be decoded: its tag is
				// unknown, so its request can never be answered,
				// and what follows it cannot be trusted to start
				// a frame. End the connection.
				cs.server.log.Printf("p9.recv: %v", perr)
				return
			}
			continue
		}

		if f, ok := m.(*tflush); ok {
			f.old = cs.lookupTag(f.OldTag)
		}
		st, ok := cs.StartTag(tag, m)
		if !ok {
			cs.server.log.Printf("no valid tag [%05d]", tag)
			// Nothing we can do at this point; client is bogus.
			release(cs.slots)
			continue
		}
		st.slot, st.refuse = cs.slotFor(m)
		cs.orderOnFid(m, st)
		cs.pendingWg.Add(1)
		if st.after == nil && st.refuse == nil && cs.inline(m) {
			cs.handleRequest(tag, st, m) // fastpath.go
			continue
		}
		go cs.handleRequest(tag, st, m)
	}
}

// handleRequest handles one request and writes its reply.
func (cs *connState) handleRequest(tag tag, st *tagState, m message) {
	defer cs.pendingWg.Done()

	if st.after != nil {
		select {
		case <-st.after:
		case <-cs.ctx.Done():
		}
	}
	var r message
	if st.refuse != nil {
		r = newErr(st.refuse)
	} else {
		r = cs.handle(m)
	}
	cs.opened(st)

	cs.sendMu.Lock()
	cs.ClearTag(tag)
	var err error
	if !st.aborted.Load() {
		cs.writeDeadline()
		err = send(cs.server.log, cs.r, tag, r)
	}
	// The reply is written: the slot is free before a Tflush waiting
	// on sent is answered, so a client that has the Rflush may use it.
	release(st.slot)
	close(st.sent)
	cs.sendMu.Unlock()
	if a, ok := r.(afterSender); ok {
		a.afterSend(err == nil)
	}
	if st.cancel != nil {
		st.cancel()
	}
	cs.active()
	if err != nil {
		cs.server.log.Printf("p9.send: %v", err)
		cs.fail()
	}

	msgDotLRegistry.put(m)
}

func (cs *connState) handle(m message) (r message) {
	defer func() {
		if r == nil {
			// Don't allow a panic to propagate.
			err := recover()

			// Include a useful log message.
			cs.server.log.Printf("panic in handler - %v: %s", err, debug.Stack())

			// Wrap in an EFAULT error; we don't really have a
			// better way to describe this kind of error. It will
			// usually manifest as a result of the test framework.
			r = newErr(linux.EFAULT)
		}
	}()

	if handler, ok := m.(handler); ok {
		// Call the message handler.
		r = handler.handle(cs)
	} else {
		// Produce an ENOSYS error.
		r = newErr(linux.ENOSYS)
	}
	return
}

func (cs *connState) stop() {
	// Wait for completion of all inflight request goroutines.. If a
	// request is stuck, something has the opportunity to kill us with
	// SIGABRT to get a stack dump of the offending handler.
	cs.pendingWg.Wait()

	// Ensure the connection is closed.
	cs.r.Close()
	cs.t.Close()
	cs.splice.close()

	for _, fidRef := range cs.fids {
		// Drop final reference in the fid table. Note this should
		// always close the file, since we've ensured that there are no
		// handlers running via the wait for Pending => 0 below.
		fidRef.DecRef()
	}
}

// Handle handles a single connection.
func (s *Server) Handle(t io.ReadCloser, r io.WriteCloser) error {
	cs := &connState{
		server: s,
		t:      t,
		r:      r,
		fids:   make(map[fid]*fidRef),
		tags:   make(map[tag]*tagState),
	}
	parent := s.ctx
	if parent == nil {
		parent = context.Background()
	}
	cs.ctx, cs.cancel = context.WithCancel(parent)
	cs.slots = newSlots(s.maxRequests)
	cs.blocking = newSlots(s.maxBlocking)
	cs.in = newFrameReader(cs)
	cs.active()
	defer cs.stop()

	// Read requests from t in the current goroutine; handleRequests()
	// runs each in a goroutine of its own.
	cs.handleRequests()
	cs.cancel()
	return nil
}

func isErrClosing(err error) bool {
	return strings.Contains(err.Error(), "use of closed network connection")
}

// Serve handles requests from the bound socket.
//
// The passed serverSocket _must_ be created in packet mode.
func (s *Server) Serve(serverSocket net.Listener) error {
	return s.ServeContext(nil, serverSocket)
}

var errAlreadyClosed = errors.New("already closed")

// ServeContext handles requests from the bound socket.
//
// The passed serverSocket _must_ be created in packet mode.
//
// When the context is done, the listener is closed and serve returns once
// every request has been handled.
func (s *Server) ServeContext(ctx context.Context, serverSocket net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()

	var cancelCause context.CancelCauseFunc
	if ctx != nil {
		ctx, cancelCause = context.WithCancelCause(ctx)

		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ctx.Done()

			// Only close the server socket if it wasn't already closed.
			if err := ctx.Err(); errors.Is(err, errAlreadyClosed) {
				return
			}
			serverSocket.Close()
		}()
	}

	for {
		conn, err := serverSocket.Accept()
		if err != nil {
			if cancelCause != nil {
				cancelCause(errAlreadyClosed)
			}
			if isErrClosing(err) {
				return nil
			}
			// Something went wrong.
			return err
		}

		wg.Add(1)
		go func(conn net.Conn) { // S/R-SAFE: Irrelevant.
			s.Handle(conn, conn)
			wg.Done()
		}(conn)
	}
}
