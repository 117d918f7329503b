package p9

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"syscall"

	"github.com/hugelgupf/p9/linux"
)

// The read and listing paths carry the bulk of a session's bytes, so they
// have ways around the general ones, each chosen by an optional interface
// of the File: nothing changes for a File that has none of them.
//
//   - Every Tread is read into a buffer taken from a pool of size classes,
//     sized by the request's count, not by msize, and put back after the
//     reply is written without being zeroed: only the n bytes ReadAt
//     reports are ever sent, and io.ReaderAt requires them to be written.
//     (Stock p9 keeps a pool of msize buffers per connection and a second
//     msize buffer of zeros it copies over each reply's data.)
//   - A File that is a HostFileReader and a transport that is a socket
//     (the writer given to Handle is a syscall.Conn): the data goes from the
//     file to the socket with splice(2), through a pipe, and is never copied
//     through this process's memory (splice_linux.go).
//   - A File that is a DirentsReader answers Treaddir with entries it keeps
//     already encoded, and the reply is its slice, written as it is.

// HostFileReader is implemented by a File whose ReadAt reads an open host
// file: the server may then serve a Tread by moving the bytes from that file
// to the socket with splice(2), without ReadAt.
type HostFileReader interface {
	// HostFile returns the file ReadAt reads (an *os.File, or a type that
	// embeds one and reads as it does), or false when
	// reads are not of a host file at the moment; the server then calls
	// ReadAt. It is called under the fid's reference, and the file must
	// stay open until the Tread's reply has been built.
	HostFile() (syscall.Conn, bool)
}

// DirentsReader is implemented by a directory File that keeps its listing
// in Rreaddir's wire form.
type DirentsReader interface {
	// ReaddirWire returns the entries from offset, already encoded
	// (qid[13] offset[8] type[1] name[s] each), as many whole entries as
	// fit in count bytes; nil at the end. The server writes the slice as
	// it is and keeps it only until the reply has been written: the File
	// must not change those bytes meanwhile.
	ReaddirWire(offset uint64, count uint32) ([]byte, error)
	// ReaddirReady reports whether ReaddirWire at offset would answer
	// from entries already at hand, without waiting (a listing still being
	// read may not have reached offset): only then is the Treaddir served
	// in the goroutine that reads the connection.
	ReaddirReady(offset uint64) bool
}

// Read buffers, by size class: class k holds buffers of 4 KiB << k, up to
// maximumLength. Shared by every connection of the process, like dataPool:
// a connection holds a buffer only while one of its Treads is being read
// and written, so an idle connection holds none.
var readBufs [12]sync.Pool

func readBufClass(n int) int {
	if n <= 4096 {
		return 0
	}
	return min(bits.Len(uint(n-1))-12, len(readBufs)-1)
}

// getReadBuf returns a buffer of at least n bytes, not zeroed.
func getReadBuf(n int) *[]byte {
	k := readBufClass(n)
	if b, ok := readBufs[k].Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:cap(*b)]
		return b
	}
	b := make([]byte, max(4096<<k, n))
	return &b
}

// takeReadBuf is getReadBuf for a Tread of cs, charged to its server's
// budget (WithReadBuffers); release gives the charge back, once (nil when
// nothing was charged).
func (cs *connState) takeReadBuf(n int) (b *[]byte, release func(), err error) {
	if charge := cs.server.readCharge; charge != nil {
		if err := charge(int64(n)); err != nil {
			return nil, nil, linux.ENOMEM
		}
		var once sync.Once
		r := cs.server.readRelease
		release = func() { once.Do(func() { r(int64(n)) }) }
	}
	return getReadBuf(n), release, nil
}

// putReadBuf returns b to its class. A nil b is ignored.
func putReadBuf(b *[]byte) {
	if b == nil {
		return
	}
	readBufs[readBufClass(cap(*b))].Put(b)
}

// rreaddirWire is an Rreaddir whose entries the File encoded: the payload
// is written as it is.
type rreaddirWire struct {
	data []byte
}

func (r *rreaddirWire) decode(b *buffer)    { b.markOverrun() } // only ever sent
func (r *rreaddirWire) encode(b *buffer)    { b.Write32(uint32(len(r.data))) }
func (*rreaddirWire) typ() msgType          { return msgRreaddir }
func (*rreaddirWire) FixedSize() uint32     { return 4 }
func (r *rreaddirWire) Payload() []byte     { return r.data }
func (r *rreaddirWire) SetPayload(p []byte) { r.data = p }
func (*rreaddirWire) PayloadCleanup()       {}
func (r *rreaddirWire) String() string      { return fmt.Sprintf("Rreaddir{len(Data): %d}", len(r.data)) }

// afterSender is a reply with work to do once it has been sent, or has
// failed to be: a spliced Rread that reads the next chunk ahead. Called
// outside the send lock, before the request's slot is released.
type afterSender interface {
	afterSend(sent bool)
}

// directSender is a reply that writes itself to the transport (under the
// connection's send lock) instead of being encoded by send.
type directSender interface {
	message
	sendDirect(w io.Writer, t tag) error
}

// putRreadHeader fills h with an Rread's header for count bytes of data.
func putRreadHeader(h *[rreadHeaderLength]byte, t tag, count uint32) {
	binary.LittleEndian.PutUint32(h[0:], rreadHeaderLength+count)
	h[4] = uint8(msgRread)
	binary.LittleEndian.PutUint16(h[5:], uint16(t))
	binary.LittleEndian.PutUint32(h[7:], count)
}

// QuickFile is implemented by a File that can tell which requests on it
// are answered from the local file system and memory alone, without
// waiting on anything else (another process, an event, a lock held across
// a wait): those the server may serve in the goroutine that reads the
// connection.
type QuickFile interface {
	// Quick reports whether a Twalk of names from this File is quick;
	// with no names, whether a Tgetattr, Tlopen or Tclunk of it is.
	Quick(names []string) bool
}

// QuickAttacher is implemented by an Attacher whose Attach, and a
// Tgetattr of the root it returns, are quick in QuickFile's sense.
type QuickAttacher interface {
	QuickAttach() bool
}

// inline reports whether m is served in the goroutine that reads the
// connection, before the next request is read: a Tread of an open host
// file, a Treaddir past the start of a listing a DirentsReader keeps and
// has read that far, a Twalk, Tgetattr, Tlopen or Tclunk a QuickFile
// calls quick, a Tattach of the root a QuickAttacher calls quick, or a
// Tversion that finds the session empty (no fid held, nothing else in
// flight: what opens every connection), whose reset then has nothing to
// abort or close. Each is a splice, a pread, a slice of memory or a few
// system calls on local files, and none waits on anything but the local
// file system; handing it to a goroutine of its own and back costs more
// than it does (at 64 KiB, about as much as the read; for a Tgetattr, most
// of the round trip: a new goroutine wakes a second thread, and on a
// virtual machine each wake-up is a costly switch). A Treaddir at offset
// 0 lists the directory anew, which can take long: it gets its goroutine.
func (cs *connState) inline(m message) bool {
	var id fid
	var names []string
	switch r := m.(type) {
	case *tversion:
		return cs.emptySession()
	case *tattach:
		// A path to walk may reach files that are not quick.
		qa, ok := cs.server.attacher.(QuickAttacher)
		return ok && (r.Auth.AttachName == "" || r.Auth.AttachName == "/") && qa.QuickAttach()
	case *tread:
		id = r.fid
	case *treaddir:
		if r.Offset == 0 {
			return false
		}
		id = r.Directory
	case *twalk:
		id, names = r.fid, r.Names
	case *twalkgetattr:
		id, names = r.fid, r.Names
	case *tgetattr:
		id = r.fid
	case *tlopen:
		id = r.fid
	case *tclunk:
		id = r.fid
	default:
		return false
	}
	ref, ok := cs.LookupFID(id)
	if !ok {
		return false
	}
	defer ref.DecRef()
	switch r := m.(type) {
	case *tread:
		hf, ok := ref.file.(HostFileReader)
		if !ok {
			return false
		}
		_, ok = hf.HostFile()
		return ok
	case *treaddir:
		dr, ok := ref.file.(DirentsReader)
		return ok && dr.ReaddirReady(r.Offset)
	}
	q, ok := ref.file.(QuickFile)
	return ok && q.Quick(names)
}

// emptySession reports whether the connection holds no fid and has no
// request in flight but the one being read.
func (cs *connState) emptySession() bool {
	cs.fidMu.Lock()
	fids := len(cs.fids)
	cs.fidMu.Unlock()
	cs.tagMu.Lock()
	tags := len(cs.tags)
	cs.tagMu.Unlock()
	return fids == 0 && tags <= 1
}
