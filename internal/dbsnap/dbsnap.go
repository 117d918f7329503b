// Package dbsnap opens a read-only, consistent snapshot of a SQLite database
// that another program may be writing, without leaving the confinement layer
// and without writing a byte.
//
// Why not open the file with the driver: SQLite opens the database, its -wal
// and its -shm by path (following links, outside saferoot), and a reader of a
// WAL database maps and writes the -shm wal-index. The daemon's unit cannot
// write the agents' homes (ProtectHome=read-only) and must never follow a
// link an agent swapped in. So the snapshot is made here: the main file and
// its -wal are read into memory through saferoot (no link followed, no mount
// crossed, nothing written), the WAL's committed frames are applied by this
// package (fileformat §4: header magic and checksum, the salts, the
// cumulative frame checksums, frames up to the last valid commit frame), the
// header's read/write version bytes are set to 1 (rollback journal) so that
// the engine looks for no WAL, and the image is opened as an immutable
// database in memory by github.com/ncruces/go-sqlite3 (pure Go, no cgo: SQLite
// translated from Wasm by wasm2go) through its "reader" VFS, which opens no
// other file and takes no lock. Temporary storage is kept in memory.
//
// Consistency against a live writer: the -wal header is read first, then the
// main file, then the whole -wal. A WAL writer changes the main file only in
// a checkpoint, which copies pages whose newest version is still in the WAL
// (so the overlay wins), and restarts the WAL only after a complete
// checkpoint, which rewrites the WAL header (new salts): a header that
// differs between the first and the last read, a main file whose size, mtime
// or ctime changed, or a first page that changed, makes the snapshot be taken
// again. A rollback-journal writer changes the main file in place; a -journal
// that is not idle makes the snapshot be taken again too.
package dbsnap

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"runtime/debug"
	"time"

	sqlite "github.com/ncruces/go-sqlite3/driver"
	"github.com/ncruces/go-sqlite3/vfs/readervfs"
	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/saferoot"
)

// MaxBytes bounds what one snapshot holds in memory: the main file plus its
// -wal (rule 10, bounded memory). An agent's state database is small (a
// Codex state_5.sqlite of a thousand threads is a few MB), but opencode keeps
// every message of every session in its database, which grows for as long as
// it is used; 256 MiB keeps years of that while still bounding a daemon that
// may hold a few snapshots at once. WithMaxBytes lowers it per call.
const MaxBytes = 256 << 20

// attempts is how often a snapshot is taken again when a writer changed the
// files under the read; the pause between attempts doubles from
// firstPause. A writer's commit takes milliseconds, so a few attempts
// spanning tens of milliseconds see a quiet moment.
const (
	attempts   = 6
	firstPause = 2 * time.Millisecond
)

// Option configures Open.
type Option func(*config)

type config struct {
	max  int64
	pool *budget.Pool
}

// WithMaxBytes lowers (or raises) the bound on main file plus -wal.
func WithMaxBytes(n int64) Option { return func(c *config) { c.max = n } }

// WithBudget charges the snapshot's bytes to p: those of the files while
// they are read, then the image's, until the DB is closed. A snapshot that
// does not fit is refused with an error of kind errs.NoMem, before its
// bytes are read.
func WithBudget(p *budget.Pool) Option { return func(c *config) { c.pool = p } }

// Open returns a read-only snapshot of the SQLite database at rel under
// root. The snapshot does not change when the file does: open another to
// see newer rows. Close the DB to free its memory.
//
// Errors: NotExist when rel is absent (or a symlink, or not a regular file),
// Invalid when it is not a SQLite database or exceeds the bound, Busy when a
// writer kept changing it through every attempt.
func Open(root *saferoot.Root, rel string, opts ...Option) (*sql.DB, error) {
	const op = "dbsnap.Open"
	cfg := configure(opts)
	img, ch, err := takeImage(root, rel, cfg)
	if err != nil {
		return nil, err
	}
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, errs.E(op, errs.IO, rel, err)
	}
	name := "dbsnap-" + hex.EncodeToString(nb[:])
	// The image's charge goes with it: released when the connector is
	// closed, after the last connection.
	defer func() {
		if ch != nil {
			ch.Release()
		}
	}()
	readervfs.Create(name, image(img))
	// query_only: the engine refuses any write statement itself;
	// temp_store: sorts and temporary tables stay in memory (the reader VFS
	// would hand temporary files to the default VFS, on disk).
	dsn := "file:" + name + "?vfs=reader&mode=ro&_pragma=query_only(1)&_pragma=temp_store(memory)"
	c, err := (&sqlite.SQLite{}).OpenConnector(dsn)
	if err != nil {
		readervfs.Delete(name)
		return nil, errs.E(op, errs.Other, rel, err)
	}
	db := sql.OpenDB(&connector{Connector: c, name: name, charge: ch})
	ch = nil
	// Fail here, not at the caller's first query, when the image is not a
	// database the engine accepts.
	if err := db.PingContext(context.Background()); err != nil {
		db.Close()
		return nil, errs.E(op, errs.Invalid, rel, err)
	}
	return db, nil
}

// connector forgets the image when the DB is closed (sql.DB.Close calls
// Close on a connector that has one).
type connector struct {
	driver.Connector
	name   string
	charge *budget.Hold
}

func (c *connector) Close() error {
	readervfs.Delete(c.name)
	c.charge.Release()
	return nil
}

// image is the snapshot as the reader VFS wants it.
type image []byte

func (b image) ReadAt(p []byte, off int64) (int, error) { return bytes.NewReader(b).ReadAt(p, off) }
func (b image) Size() (int64, error)                    { return int64(len(b)), nil }

// errChanged: a writer changed the files during the read; read again.
var errChanged = errors.New("changed during the read")

// Image returns the bytes of the database at rel as of its last commit,
// with the WAL applied and the header set to rollback-journal mode: a
// complete database file, for Open or for a caller with its own engine.
//
// With WithBudget, the image is charged while it is read and released on
// return: it is the caller's to account for.
func Image(root *saferoot.Root, rel string, opts ...Option) ([]byte, error) {
	img, ch, err := takeImage(root, rel, configure(opts))
	ch.Release()
	return img, err
}

func configure(opts []Option) config {
	cfg := config{max: MaxBytes}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// takeImage is Image with the image's charge, which the caller releases.
// An attempt that found the files changed leaves its buffers, still
// charged, to the next: a database written to faster than it is read
// would otherwise leave an image's worth of garbage per attempt, which
// the collector reclaims only after the next attempt has allocated
// another.
func takeImage(root *saferoot.Root, rel string, cfg config) ([]byte, *budget.Hold, error) {
	const op = "dbsnap.Image"
	ch := budget.NewHold(cfg.pool)
	var bufs buffers
	pause := firstPause
	for i := 0; ; i++ {
		img, err := read(root, rel, cfg.max, ch, &bufs)
		if err == nil {
			// The charge is the image's array, which may be a
			// reused buffer larger than this image needs.
			ch.Give(ch.Held() - int64(cap(img)))
			return img, ch, nil
		}
		if !errors.Is(err, errChanged) || i == attempts-1 {
			ch.Release()
			bufs.drop()
			switch {
			case errors.Is(err, errChanged):
				return nil, nil, errs.E(op, errs.Busy, rel, err)
			case errs.KindOf(err) != errs.Other:
				return nil, nil, err
			}
			return nil, nil, errs.E(op, errs.Invalid, rel, err)
		}
		time.Sleep(pause)
		pause *= 2
	}
}

// buffers are what a snapshot is read into: the main file, with room for
// the WAL's pages, and the WAL.
type buffers struct{ main, wal []byte }

// drop lets go of b's buffers, and gives their memory back to the system
// at once when they are large, as a closed snapshot's is (returnAfter):
// the next request for the database would take as much again before a
// collection found these (a 180 MiB database its writer kept changing
// held the daemon at 356 MiB, the runtime's soft limit).
func (b *buffers) drop() {
	large := cap(b.main)+cap(b.wal) >= returnAfter
	*b = buffers{}
	if large {
		debug.FreeOSMemory()
	}
}

// room is the capacity of sized(b, _, c, limit): b's if it has room for
// c; else c, and up to an eighth more (within limit) in place of a b too
// small (the files grew between attempts, and may grow again before the
// next).
func room(b []byte, c, limit int64) int64 {
	switch {
	case int64(cap(b)) >= c:
		return int64(cap(b))
	case b != nil:
		return max(c, min(c+c/8, limit))
	}
	return c
}

// sized is b as n bytes, or a new buffer of n bytes when b has not room
// for c.
func sized(b []byte, n, c, limit int64) []byte {
	if r := room(b, c, limit); r != int64(cap(b)) {
		return make([]byte, n, r)
	}
	return b[:n]
}

// fileID is what changes when a file is written.
type fileID struct {
	dev, ino   uint64
	size       int64
	mtime, ctm unix.Timespec
}

func statID(f *os.File) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, err
	}
	return fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctm: st.Ctim}, nil
}

// read takes one snapshot into bufs, or errChanged. The bytes it holds
// are charged to ch before they are read: the main file with room for the
// WAL's pages (so applying them never copies the image), and the WAL
// until applied. ch may hold enough already, for bufs read before.
func read(root *saferoot.Root, rel string, limit int64, ch *budget.Hold, bufs *buffers) ([]byte, error) {
	const op = "dbsnap.read"
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	id1, err := statID(f)
	if err != nil {
		return nil, errs.E(op, errs.IO, rel, err)
	}
	if id1.size > limit {
		return nil, errs.E(op, errs.Invalid, rel, errors.New("database larger than the bound"))
	}

	// The -wal, opened once: its header now, all of it after the main file.
	w, hdr1, walSize, err := openWAL(root, rel, limit-id1.size)
	if err != nil {
		return nil, err
	}
	if w != nil {
		defer w.Close()
	}
	if err := journalIdle(root, rel); err != nil {
		return nil, err
	}

	// ch covers bufs once they have room for this attempt: a buffer too
	// small is replaced (and garbage until collected), a larger one kept.
	if more := room(bufs.main, id1.size+walSize, limit) + room(bufs.wal, walSize, limit) - ch.Held(); more > 0 {
		if err := ch.Take(more); err != nil {
			return nil, err
		}
	}
	bufs.main = sized(bufs.main, id1.size, id1.size+walSize, limit)
	main, err := readExactly(f, bufs.main)
	if err != nil {
		return nil, errs.E(op, errs.IO, rel, err)
	}
	if main == nil {
		return nil, errChanged // shorter than it was
	}
	// The WAL as long as it was when the read began: frames appended since
	// belong to later commits, and a restarted WAL has another header.
	var wal []byte
	if w != nil {
		bufs.wal = sized(bufs.wal, walSize, walSize, limit)
		wal, err = readExactly(w, bufs.wal)
		if err != nil {
			return nil, errs.E(op, errs.IO, rel+"-wal", err)
		}
		if wal == nil {
			return nil, errChanged
		}
	}

	if err := unchanged(root, rel, f, id1, main, w != nil, hdr1, wal); err != nil {
		return nil, err
	}
	img, err := apply(main, wal, limit)
	if err != nil {
		return nil, errs.E(op, errs.Invalid, rel, err)
	}
	return img, nil
}

// openWAL opens rel's -wal, if there is one, and reads its size and
// header: errs.Invalid when it is larger than room. A -wal replaced by a
// link is NotExist here, the same as no -wal; unchanged still catches a
// header that changed.
func openWAL(root *saferoot.Root, rel string, room int64) (w *os.File, hdr []byte, size int64, err error) {
	const op = "dbsnap.read"
	w, err = root.Open(rel + "-wal")
	if errs.Is(err, errs.NotExist) {
		return nil, nil, 0, nil
	}
	if err != nil {
		return nil, nil, 0, err
	}
	id, err := statID(w)
	if err != nil {
		w.Close()
		return nil, nil, 0, errs.E(op, errs.IO, rel+"-wal", err)
	}
	if id.size > room {
		w.Close()
		return nil, nil, 0, errs.E(op, errs.Invalid, rel, errors.New("database and WAL larger than the bound"))
	}
	hdr, err = readAll(w, walHeaderSize)
	if err != nil {
		w.Close()
		return nil, nil, 0, errs.E(op, errs.IO, rel+"-wal", err)
	}
	return w, hdr, id.size, nil
}

// unchanged returns errChanged unless the files are as they were when
// the read began: the main file f's identity (id1, and main all of it)
// and first page, the WAL's header hdr1 (or its absence: hasWAL), and no
// rollback journal in progress.
func unchanged(root *saferoot.Root, rel string, f *os.File, id1 fileID, main []byte, hasWAL bool, hdr1, wal []byte) error {
	const op = "dbsnap.read"
	id2, err := statID(f)
	if err != nil {
		return errs.E(op, errs.IO, rel, err)
	}
	if id1 != id2 || int64(len(main)) != id1.size {
		return errChanged
	}
	// The whole header, or its absence, must be the same: a WAL that was
	// empty and now is not may have been restarted and checkpointed while
	// the main file was read.
	if hasWAL && !bytes.Equal(hdr1, wal[:min(len(wal), walHeaderSize)]) {
		return errChanged
	}
	if len(main) >= headerSize {
		head, err := readAll(f, headerSize)
		if err != nil {
			return errs.E(op, errs.IO, rel, err)
		}
		if !bytes.Equal(head, main[:headerSize]) {
			return errChanged
		}
	}
	return journalIdle(root, rel)
}

// readExactly fills b from the start of f, or is nil when f is shorter.
func readExactly(f *os.File, b []byte) ([]byte, error) {
	m, err := f.ReadAt(b, 0)
	if m < len(b) {
		if err == io.EOF {
			return nil, nil
		}
		return nil, err
	}
	return b, nil
}

// journalIdle returns errChanged when a rollback journal holds a
// transaction in progress: a -journal whose header is not zeroed
// (journal_mode DELETE removes it, TRUNCATE empties it, PERSIST zeroes its
// header when idle).
func journalIdle(root *saferoot.Root, rel string) error {
	j, err := root.Open(rel + "-journal")
	if errs.Is(err, errs.NotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer j.Close()
	b, err := readAll(j, 8)
	if err != nil {
		return errs.E("dbsnap.journal", errs.IO, rel+"-journal", err)
	}
	if !allZero(b) {
		return errChanged
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// readAll reads f from offset 0, up to n bytes (n is small: a header).
func readAll(f *os.File, n int64) ([]byte, error) {
	return io.ReadAll(io.NewSectionReader(f, 0, n))
}

const (
	headerSize      = 100 // the database header
	walHeaderSize   = 32
	walFrameHdrSize = 24
)

var sqliteMagic = []byte("SQLite format 3\x00")

// apply returns main with the WAL's committed frames applied and the header
// set to rollback-journal mode. It may reuse main's memory.
func apply(main, wal []byte, max int64) ([]byte, error) {
	if len(main) > 0 {
		if len(main) < headerSize || !bytes.Equal(main[:16], sqliteMagic) {
			return nil, errors.New("not a SQLite database")
		}
	}
	frames, pageSize, nPages := walFrames(wal)
	if nPages > 0 {
		if len(main) > 0 && dbPageSize(main) != pageSize {
			return nil, errors.New("WAL page size differs from the database's")
		}
		size := int64(nPages) * int64(pageSize)
		if size > max {
			return nil, errors.New("database image larger than the bound")
		}
		switch n := len(main); {
		case int64(n) >= size:
			main = main[:size]
		case int64(cap(main)) >= size: // the room read left for the WAL's pages
			main = main[:size]
			clear(main[n:])
		default:
			// Every page of a commit is in the main file or the WAL,
			// for which read left room: this one names pages
			// neither holds, and more bytes than were charged.
			return nil, errors.New("WAL commit larger than the database and WAL")
		}
		for pgno, off := range frames {
			if pgno > nPages {
				continue // beyond a commit that shrank the database
			}
			dst := int64(pgno-1) * int64(pageSize)
			copy(main[dst:dst+int64(pageSize)], wal[off:off+pageSize])
		}
		if !bytes.Equal(main[:16], sqliteMagic) {
			return nil, errors.New("not a SQLite database")
		}
	}
	if len(main) >= headerSize {
		// Rollback-journal mode: the engine opens no -wal and no -shm.
		main[18], main[19] = 1, 1
	}
	return main, nil
}

// dbPageSize is the page size in a database header (1 means 65536).
func dbPageSize(main []byte) int {
	n := int(binary.BigEndian.Uint16(main[16:18]))
	if n == 1 {
		return 65536
	}
	return n
}

// walFrames parses a WAL (fileformat §4.1-4.3) and returns, for each page,
// the offset in wal of its newest frame at or before the last valid commit
// frame, the page size, and the database size in pages after that commit
// (0 when no commit is valid: the WAL adds nothing).
func walFrames(wal []byte) (frames map[uint32]int, pageSize int, nPages uint32) {
	if len(wal) < walHeaderSize {
		return nil, 0, 0
	}
	magic := binary.BigEndian.Uint32(wal[0:4])
	var order binary.ByteOrder
	switch magic {
	case 0x377f0682:
		order = binary.LittleEndian
	case 0x377f0683:
		order = binary.BigEndian
	default:
		return nil, 0, 0
	}
	if binary.BigEndian.Uint32(wal[4:8]) != 3007000 {
		return nil, 0, 0
	}
	pageSize = int(binary.BigEndian.Uint32(wal[8:12]))
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return nil, 0, 0
	}
	salt1, salt2 := binary.BigEndian.Uint32(wal[16:20]), binary.BigEndian.Uint32(wal[20:24])
	s0, s1 := checksum(order, 0, 0, wal[:24])
	if s0 != binary.BigEndian.Uint32(wal[24:28]) || s1 != binary.BigEndian.Uint32(wal[28:32]) {
		return nil, 0, 0
	}
	// Frames are collected provisionally and kept only up to the last
	// commit frame: a transaction whose commit frame is missing or torn is
	// not applied.
	committed := map[uint32]int{}
	var pending []struct {
		pgno uint32
		off  int
	}
	frameSize := walFrameHdrSize + pageSize
	for off := walHeaderSize; off+frameSize <= len(wal); off += frameSize {
		fh := wal[off : off+walFrameHdrSize]
		if binary.BigEndian.Uint32(fh[8:12]) != salt1 || binary.BigEndian.Uint32(fh[12:16]) != salt2 {
			break
		}
		page := wal[off+walFrameHdrSize : off+frameSize]
		s0, s1 = checksum(order, s0, s1, fh[:8])
		s0, s1 = checksum(order, s0, s1, page)
		if s0 != binary.BigEndian.Uint32(fh[16:20]) || s1 != binary.BigEndian.Uint32(fh[20:24]) {
			break
		}
		pgno := binary.BigEndian.Uint32(fh[0:4])
		if pgno == 0 {
			break
		}
		pending = append(pending, struct {
			pgno uint32
			off  int
		}{pgno, off + walFrameHdrSize})
		if commit := binary.BigEndian.Uint32(fh[4:8]); commit != 0 {
			for _, p := range pending {
				committed[p.pgno] = p.off
			}
			pending = pending[:0]
			nPages = commit
		}
	}
	if nPages == 0 {
		return nil, 0, 0
	}
	return committed, pageSize, nPages
}

// checksum is the WAL checksum (fileformat §4.3) of b, a multiple of 8
// bytes, continuing from s0, s1; words are read in the byte order the WAL
// header's magic names.
func checksum(order binary.ByteOrder, s0, s1 uint32, b []byte) (uint32, uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	return s0, s1
}

// Version identifies the state of a database and its -wal: equal Versions
// mean equal snapshots, so a caller can keep what it derived from one. The
// zero FileVersion stands for an absent -wal.
type Version struct {
	DB, WAL FileVersion
}

// FileVersion is what changes when a file is replaced or written.
type FileVersion struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64 // nanoseconds since the epoch
}

func fileVersion(i saferoot.Info) FileVersion {
	return FileVersion{Dev: i.Dev, Ino: i.Ino, Size: i.Size, Mtime: i.Mtime.UnixNano(), Ctime: i.Ctime.UnixNano()}
}

// Stat returns the Version of the database at rel: a Stat of the file and
// of its -wal, through saferoot.
func Stat(root *saferoot.Root, rel string) (Version, error) {
	db, err := root.Stat(rel)
	if err != nil {
		return Version{}, err
	}
	v := Version{DB: fileVersion(db)}
	wal, err := root.Stat(rel + "-wal")
	switch {
	case err == nil:
		v.WAL = fileVersion(wal)
	case !errs.Is(err, errs.NotExist):
		return Version{}, err
	}
	return v, nil
}
