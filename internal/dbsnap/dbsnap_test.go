package dbsnap

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/saferoot"
)

// writer opens path for writing in WAL mode with the same engine, with
// automatic checkpoints off unless ckpt > 0.
func writer(t *testing.T, path string, ckpt int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+fmt.Sprintf("?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(%d)&_pragma=busy_timeout(5000)", ckpt))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, tx INTEGER, pad BLOB)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// insertTx inserts n rows of tx in one transaction, each padded to pad
// bytes so that a transaction spans several pages.
func insertTx(t testing.TB, db *sql.DB, tx, n, pad int) {
	t.Helper()
	if err := insertTxErr(db, tx, n, pad); err != nil {
		t.Fatal(err)
	}
}

func insertTxErr(db *sql.DB, tx, n, pad int) error {
	x, err := db.Begin()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if _, err := x.Exec(`INSERT INTO t (tx, pad) VALUES (?, zeroblob(?))`, tx, pad); err != nil {
			x.Rollback()
			return err
		}
	}
	return x.Commit()
}

func count(t testing.TB, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func snapCount(t testing.TB, root *saferoot.Root, rel string) int {
	t.Helper()
	db, err := Open(root, rel)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return count(t, db)
}

func listing(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		fi, _ := e.Info()
		names = append(names, fmt.Sprintf("%s %d", e.Name(), fi.Size()))
	}
	return names
}

// No writer: a database whose writer has closed (WAL checkpointed and
// removed), and one whose committed rows are still only in the -wal.
func TestNoWriter(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "closed.db"), 1000)
	insertTx(t, w, 1, 7, 10)
	w.Close()
	if _, err := os.Stat(filepath.Join(dir, "closed.db-wal")); !os.IsNotExist(err) {
		t.Fatalf("closed writer left a -wal: %v", err)
	}

	w2 := writer(t, filepath.Join(dir, "wal.db"), 0)
	insertTx(t, w2, 1, 5, 10)
	insertTx(t, w2, 2, 6, 3000)
	// The rows are in the -wal only: the main file has no table t yet
	// beyond the schema page or nothing at all.
	root := saferoot.New(dir)
	if got := snapCount(t, root, "closed.db"); got != 7 {
		t.Errorf("closed.db: %d rows, want 7", got)
	}
	if got := snapCount(t, root, "wal.db"); got != 11 {
		t.Errorf("wal.db: %d rows, want 11 (the WAL's commits applied)", got)
	}
	if _, err := Open(root, "absent.db"); !errs.Is(err, errs.NotExist) {
		t.Errorf("absent: %v, want NotExist", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.db"), []byte(strings.Repeat("not sqlite ", 50)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(root, "junk.db"); !errs.Is(err, errs.Invalid) {
		t.Errorf("junk: %v, want Invalid", err)
	}
	if _, err := Open(root, "wal.db", WithMaxBytes(4096)); !errs.Is(err, errs.Invalid) {
		t.Errorf("over the bound: %v, want Invalid", err)
	}
	// A snapshot is read-only: the engine refuses a write.
	db, err := Open(root, "wal.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO t (tx) VALUES (9)`); err == nil {
		t.Error("a write to the snapshot succeeded")
	}
}

// A torn or uncommitted tail of the -wal is not applied: the snapshot is
// the last transaction whose commit frame and checksum chain are intact.
func TestTornWAL(t *testing.T) {
	src := t.TempDir()
	w := writer(t, filepath.Join(src, "s.db"), 0)
	insertTx(t, w, 1, 4, 10)
	walA, err := os.ReadFile(filepath.Join(src, "s.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	// Transaction 2 spans several frames (4 rows of 3000 bytes, pages of
	// 4096): the last frame is its commit frame.
	insertTx(t, w, 2, 4, 3000)
	walB, err := os.ReadFile(filepath.Join(src, "s.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	mainB, err := os.ReadFile(filepath.Join(src, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, pageSize, _ := walFrames(walB)
	frame := walFrameHdrSize + pageSize
	if n := (len(walB) - len(walA)) / frame; n < 2 {
		t.Fatalf("transaction 2 wrote %d frames, want several", n)
	}

	lastCommitFlipped := slices.Clone(walB)
	lastCommitFlipped[len(walB)-10] ^= 0xff
	secondLastFlipped := slices.Clone(walB)
	secondLastFlipped[len(walB)-frame-10] ^= 0xff
	otherSalt := slices.Clone(walB)
	otherSalt[len(walB)-frame+8] ^= 0x01

	for _, tc := range []struct {
		name string
		wal  []byte
		want int
	}{
		{"whole", walB, 8},
		{"last frame torn", walB[:len(walB)-100], 4},
		{"commit frame missing", walB[:len(walB)-frame], 4},
		{"commit frame checksum bad", lastCommitFlipped, 4},
		{"earlier frame checksum bad", secondLastFlipped, 4},
		{"commit frame from another generation", otherSalt, 4},
		{"header only", walB[:walHeaderSize], 0},
		{"header torn", walB[:20], 0},
		{"first transaction only", walA, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "s.db"), mainB, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "s.db-wal"), tc.wal, 0o644); err != nil {
				t.Fatal(err)
			}
			root := saferoot.New(dir)
			db, err := Open(root, "s.db")
			if tc.want == 0 {
				// The main file holds no table yet: the snapshot has none.
				if err == nil {
					_, qerr := db.Exec(`SELECT count(*) FROM t`)
					db.Close()
					if qerr == nil {
						t.Error("table t visible with no committed WAL frame")
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if got := count(t, db); got != tc.want {
				t.Errorf("%d rows, want %d", got, tc.want)
			}
		})
	}
}

// TestCommitBeyondFiles: a WAL whose commit names pages that neither the
// main file nor the WAL holds (here the main file cut to its first page)
// is refused as invalid: the image would need more bytes than read
// charged, and its missing pages would be zeros.
func TestCommitBeyondFiles(t *testing.T) {
	src := t.TempDir()
	w := writer(t, filepath.Join(src, "s.db"), 0)
	insertTx(t, w, 1, 20, 3000) // about 20 pages
	if _, err := w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	insertTx(t, w, 2, 1, 10) // a commit of a page or two
	main, err := os.ReadFile(filepath.Join(src, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	wal, err := os.ReadFile(filepath.Join(src, "s.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pageSize := dbPageSize(main)
	if err := os.WriteFile(filepath.Join(dir, "s.db"), main[:pageSize], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s.db-wal"), wal, 0o644); err != nil {
		t.Fatal(err)
	}
	pool := budget.New("test", 1<<30)
	_, err = Image(saferoot.New(dir), "s.db", WithBudget(pool))
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "WAL commit larger") {
		t.Errorf("a commit beyond the files: %v, want it refused as invalid", err)
	}
	if u := pool.Used(); u != 0 {
		t.Errorf("%d bytes still charged", u)
	}
}

// TestImageCharge: under a writer whose commits make attempts retry,
// every image taken is charged exactly its array's bytes (a buffer reused
// from an attempt that found the files changed included), and nothing
// once released.
func TestImageCharge(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "s.db"), 8)
	insertTx(t, w, 0, 50, 3000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for tx := 1; ; tx++ {
			select {
			case <-stop:
				return
			default:
			}
			// Rewrites, not inserts: the file keeps its size.
			w.Exec(`UPDATE t SET pad = zeroblob(?) WHERE id = ?`, 2000+tx%7*300, 1+tx%50)
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	root := saferoot.New(dir)
	pool := budget.New("test", 1<<30)
	var taken, busy int
	for range 50 {
		img, ch, err := takeImage(root, "s.db", config{max: MaxBytes, pool: pool})
		if errs.Is(err, errs.Busy) {
			busy++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		taken++
		if h, u := ch.Held(), pool.Used(); h != int64(cap(img)) || u != h {
			t.Fatalf("image of %d bytes (array %d): held %d, pool %d", len(img), cap(img), h, u)
		}
		ch.Release()
		if u := pool.Used(); u != 0 {
			t.Fatalf("%d bytes charged after the release", u)
		}
	}
	t.Logf("%d images, %d busy", taken, busy)
	if taken == 0 {
		t.Fatal("no image was taken")
	}
}

// TestReadReusesBuffers: an attempt after one that found the files
// changed reads into the same arrays, charged once, and a buffer the
// files outgrew is replaced by one with room to spare: a database written
// to faster than it is read costs an image or two, not one per attempt.
func TestReadReusesBuffers(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "s.db"), 0)
	insertTx(t, w, 1, 20, 3000)
	root := saferoot.New(dir)
	pool := budget.New("test", 1<<30)
	ch := budget.NewHold(pool)
	defer ch.Release()
	var bufs buffers
	first, err := read(root, "s.db", MaxBytes, ch, &bufs)
	if err != nil {
		t.Fatal(err)
	}
	held := ch.Held()
	if want := int64(cap(bufs.main) + cap(bufs.wal)); held != want || pool.Used() != held {
		t.Fatalf("held %d, pool %d, want the buffers' %d", held, pool.Used(), want)
	}
	same, err := read(root, "s.db", MaxBytes, ch, &bufs) // as an attempt after a touch
	if err != nil {
		t.Fatal(err)
	}
	if &same[0] != &first[0] || ch.Held() != held {
		t.Errorf("a read of the same files: a new array %v, %d bytes more", &same[0] != &first[0], ch.Held()-held)
	}
	insertTx(t, w, 2, 1, 10) // the WAL grows by a page or two, past the room
	grown, err := read(root, "s.db", MaxBytes, ch, &bufs)
	if err != nil {
		t.Fatal(err)
	}
	if &grown[0] == &first[0] {
		t.Fatal("the files grew past the buffers, yet the read used them")
	}
	held = ch.Held()
	if want := int64(cap(bufs.main) + cap(bufs.wal)); held != want || pool.Used() != held {
		t.Fatalf("held %d, pool %d, want the buffers' %d", held, pool.Used(), want)
	}
	insertTx(t, w, 3, 1, 10) // and again, within the eighth to spare
	again, err := read(root, "s.db", MaxBytes, ch, &bufs)
	if err != nil {
		t.Fatal(err)
	}
	if &again[0] != &grown[0] || ch.Held() != held {
		t.Errorf("a read after a small growth: a new array %v, %d bytes more", &again[0] != &grown[0], ch.Held()-held)
	}
	fresh, err := Image(root, "s.db")
	if err != nil || !bytes.Equal(again, fresh) {
		t.Errorf("the image read into a reused buffer differs from a fresh one (%v)", err)
	}
}

// The database, or its directory, swapped for a symlink is refused, never
// followed, even when the link points at a good database.
func TestSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	w := writer(t, filepath.Join(elsewhere, "real.db"), 1000)
	insertTx(t, w, 1, 3, 10)
	w.Close()
	if err := os.Symlink(filepath.Join(elsewhere, "real.db"), filepath.Join(dir, "s.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	root := saferoot.New(dir)
	for _, rel := range []string{"s.db", "sub/real.db"} {
		if _, err := Open(root, rel); !errs.Is(err, errs.NotExist) {
			t.Errorf("%s: %v, want NotExist", rel, err)
		}
	}
}

// A symlink swapped in while a writer runs: every Open is either a good
// snapshot of the real file or NotExist, never the link's target.
func TestSymlinkSwapRace(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	w := writer(t, filepath.Join(elsewhere, "decoy.db"), 1000)
	insertTx(t, w, 1, 99, 10)
	w.Close()
	w2 := writer(t, filepath.Join(dir, "s.db"), 1000)
	insertTx(t, w2, 1, 3, 10)
	w2.Close()
	real, err := os.ReadFile(filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := filepath.Join(dir, "tmp")
			if i%2 == 0 {
				os.Symlink(filepath.Join(elsewhere, "decoy.db"), tmp)
			} else {
				os.WriteFile(tmp, real, 0o644)
			}
			os.Rename(tmp, filepath.Join(dir, "s.db"))
		}
	}()
	root := saferoot.New(dir)
	var good, refused int
	for i := 0; i < 200; i++ {
		db, err := Open(root, "s.db")
		if err != nil {
			if !errs.Is(err, errs.NotExist) {
				t.Fatalf("Open: %v", err)
			}
			refused++
			continue
		}
		if n := count(t, db); n != 3 {
			t.Fatalf("snapshot has %d rows: the link was followed", n)
		}
		db.Close()
		good++
	}
	close(stop)
	wg.Wait()
	t.Logf("%d snapshots, %d refused", good, refused)
}

// Nothing is written beside the database: no -shm, no -journal, no
// temporary file, whether or not a -wal is present and the directory is
// writable. (As root the mode does not stop a write; the listing does
// catch one.)
func TestWritesNothing(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "s.db"), 0)
	insertTx(t, w, 1, 50, 100)
	// Copy the live pair into a directory no writer has open, so that the
	// listing can only change through dbsnap.
	ro := t.TempDir()
	for _, n := range []string{"s.db", "s.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ro, n), b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	before := listing(t, ro)
	db, err := Open(saferoot.New(ro), "s.db")
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, db); got != 50 {
		t.Errorf("%d rows, want 50", got)
	}
	// A query that sorts beyond memory-free paths uses temp storage.
	if _, err := db.Exec(`SELECT pad FROM t ORDER BY random()`); err != nil {
		t.Error(err)
	}
	db.Close()
	if after := listing(t, ro); !slices.Equal(before, after) {
		t.Errorf("directory changed: %v -> %v", before, after)
	}
}

// A live writer: transactions of txRows rows commit while snapshots are
// taken, checkpoints (and WAL restarts) run often. Every snapshot opens,
// holds a whole number of transactions, and never goes back in time.
func TestLiveWriter(t *testing.T) {
	const txRows = 7
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	w := writer(t, path, 8) // a checkpoint every 8 pages: restarts are frequent
	insertTx(t, w, 0, txRows, 10)

	stop := make(chan struct{})
	var werr atomic.Value
	var commits atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for tx := 1; ; tx++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := insertTxErr(w, tx, txRows, 200+tx%5*700); err != nil {
				werr.Store(err)
				return
			}
			commits.Add(1)
			// Bursts of commits 2 ms apart, far more than an agent's
			// database sees, then a quiet moment as an agent has between
			// turns: a snapshot taken in a burst is refused as Busy or
			// retried, and one must succeed in a quiet moment however
			// slow the machine (under -race and load a snapshot of the
			// growing file takes tens of milliseconds).
			time.Sleep(2 * time.Millisecond)
			if tx%25 == 0 {
				time.Sleep(150 * time.Millisecond)
			}
			if tx%50 == 0 {
				// Some truncating checkpoints too: the -wal empties.
				w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			}
		}
	}()
	root := saferoot.New(dir)
	last := 0
	deadline := time.Now().Add(3 * time.Second)
	snaps := 0
	busy := 0
	for (time.Now().Before(deadline) || snaps < 5) && time.Now().Before(deadline.Add(60*time.Second)) {
		db, err := Open(root, "s.db")
		if err != nil {
			if errs.Is(err, errs.Busy) {
				busy++
				continue
			}
			t.Fatalf("snapshot %d: %v", snaps, err)
		}
		var n, txs int
		if err := db.QueryRow(`SELECT count(*), count(DISTINCT tx) FROM t`).Scan(&n, &txs); err != nil {
			t.Fatalf("snapshot %d: %v", snaps, err)
		}
		var check string
		if err := db.QueryRow(`PRAGMA quick_check`).Scan(&check); err != nil || check != "ok" {
			t.Fatalf("snapshot %d: quick_check %q %v", snaps, check, err)
		}
		db.Close()
		if n%txRows != 0 || n != txs*txRows {
			t.Fatalf("snapshot %d: %d rows in %d transactions: a torn transaction", snaps, n, txs)
		}
		if n < last {
			t.Fatalf("snapshot %d: %d rows after %d", snaps, n, last)
		}
		last = n
		snaps++
	}
	close(stop)
	wg.Wait()
	if e := werr.Load(); e != nil {
		t.Fatal(e)
	}
	if commits.Load() < 10 {
		t.Fatalf("writer committed only %d times: the race was not exercised", commits.Load())
	}
	if snaps < 5 {
		t.Fatalf("only %d snapshots (%d busy)", snaps, busy)
	}
	t.Logf("%d snapshots (%d busy), %d commits, last %d rows", snaps, busy, commits.Load(), last)
}

func TestStat(t *testing.T) {
	dir := t.TempDir()
	w := writer(t, filepath.Join(dir, "s.db"), 0)
	insertTx(t, w, 1, 1, 10)
	root := saferoot.New(dir)
	v1, err := Stat(root, "s.db")
	if err != nil {
		t.Fatal(err)
	}
	if v1.WAL.Size == 0 {
		t.Error("no -wal seen")
	}
	snapCount(t, root, "s.db")
	if v2, _ := Stat(root, "s.db"); v2 != v1 {
		t.Errorf("a snapshot changed the version: %+v -> %+v", v1, v2)
	}
	insertTx(t, w, 2, 1, 10)
	if v3, _ := Stat(root, "s.db"); v3 == v1 {
		t.Error("a commit did not change the version")
	}
	if _, err := Stat(root, "absent.db"); !errs.Is(err, errs.NotExist) {
		t.Errorf("absent: %v", err)
	}
}

func TestChecksum(t *testing.T) {
	// fileformat §4.3 over two 8-byte blocks, big-endian words.
	b := []byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4}
	s0, s1 := checksum(binary.BigEndian, 0, 0, b)
	// s0 = 1+0 = 1, s1 = 2+1 = 3; s0 = 1+3+3 = 7, s1 = 3+4+7 = 14
	if s0 != 7 || s1 != 14 {
		t.Errorf("checksum = %d, %d; want 7, 14", s0, s1)
	}
}
