package ninep

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/saferoot"
	"github.com/9harness/9harness/internal/tree"
)

// The benchmarks here run the whole serving stack the daemon runs (the p9
// fork's server, this adapter, the tree and saferoot) over a real
// unix socket pair, driven by a raw 9P2000.L client that does what diodls
// does: walk to the directory, open it, Treaddir until an empty reply,
// clunk. Profile with
//
//	go test -run '^$' -bench Listing -cpuprofile cpu.out ./internal/ninep

// benchDirs caches the temporary directories across benchmarks of one run.
var benchDirs sync.Map // int -> string

func benchHome(_ *testing.B, n int) string {
	if d, ok := benchDirs.Load(n); ok {
		return d.(string)
	}
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	home, err := os.MkdirTemp("", "ninep-bench-")
	must(err)
	dir := filepath.Join(home, "dir")
	must(os.Mkdir(dir, 0o755))
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%06d", i)))
		must(err)
		f.Close()
	}
	must(os.WriteFile(filepath.Join(home, "big"), make([]byte, 4<<20), 0o644))
	benchDirs.Store(n, home)
	return home
}

// TestMain makes the benchmark directories before m.Run starts the CPU
// profile, so that creating 110,000 files is not in it; only when
// benchmarks run.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		for _, n := range []int{10, 10_000, 100_000} {
			benchHome(nil, n)
		}
	}
	code := m.Run()
	benchDirs.Range(func(_, v any) bool { os.RemoveAll(v.(string)); return true })
	os.Exit(code)
}

// rawClient is a minimal synchronous 9P2000.L client (one request at a time).
type rawClient struct {
	c     net.Conn
	msize uint32
	req   []byte
	resp  []byte
}

func (r *rawClient) begin(typ uint8) {
	r.req = append(r.req[:0], 0, 0, 0, 0, typ, 1, 0)
}

func (r *rawClient) u32(v uint32) { r.req = binary.LittleEndian.AppendUint32(r.req, v) }
func (r *rawClient) u64(v uint64) { r.req = binary.LittleEndian.AppendUint64(r.req, v) }
func (r *rawClient) str(s string) {
	r.req = binary.LittleEndian.AppendUint16(r.req, uint16(len(s)))
	r.req = append(r.req, s...)
}

// rpc sends the request built and returns the reply's body.
func (r *rawClient) rpc(tb testing.TB) (uint8, []byte) {
	binary.LittleEndian.PutUint32(r.req, uint32(len(r.req)))
	if _, err := r.c.Write(r.req); err != nil {
		tb.Fatal(err)
	}
	if _, err := io.ReadFull(r.c, r.resp[:4]); err != nil {
		tb.Fatal(err)
	}
	n := binary.LittleEndian.Uint32(r.resp)
	if _, err := io.ReadFull(r.c, r.resp[4:n]); err != nil {
		tb.Fatal(err)
	}
	typ := r.resp[4]
	if typ == 7 {
		tb.Fatalf("request %d: Rlerror %d", r.req[4], binary.LittleEndian.Uint32(r.resp[7:]))
	}
	return typ, r.resp[7:n]
}

// dial serves root on one end of a socket pair as the daemon does and
// returns a raw client on the other, attached as fid 0.
func dial(tb testing.TB, root tree.Dir, msize uint32) *rawClient {
	return dialWith(tb, root, msize, true)
}

// dialWith serves root on a new connection with the p9 fork writing to the
// socket itself (socket: Treads of host files are spliced), or through a
// writer that hides the socket (every Tread is read and copied).
func dialWith(tb testing.TB, root tree.Dir, msize uint32, socket bool) *rawClient {
	srv, cli, err := socketPair()
	if err != nil {
		tb.Fatal(err)
	}
	var w io.WriteCloser = srv
	if !socket {
		w = struct{ io.WriteCloser }{srv}
	}
	go p9.NewServer(&Attacher{Root: root}, p9.WithMaxMessageSize(4<<20)).Handle(srv, w)
	tb.Cleanup(func() { cli.Close() })
	return attachRaw(tb, cli, msize)
}

// attachRaw is a raw client on cli after Tversion and Tattach (fid 0).
func attachRaw(tb testing.TB, cli net.Conn, msize uint32) *rawClient {
	r := &rawClient{c: cli, resp: make([]byte, msize+64)}
	r.begin(100)
	r.u32(msize)
	r.str("9P2000.L")
	_, body := r.rpc(tb)
	r.msize = binary.LittleEndian.Uint32(body)
	r.begin(104) // Tattach fid afid uname aname n_uname
	r.u32(0)
	r.u32(^uint32(0))
	r.str("")
	r.str("")
	r.u32(0)
	r.rpc(tb)
	return r
}

func socketPair() (net.Conn, net.Conn, error) {
	dir, err := os.MkdirTemp("", "ninep-sock-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		return nil, nil, err
	}
	defer l.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		ch <- c
	}()
	cli, err := net.Dial("unix", filepath.Join(dir, "s"))
	if err != nil {
		return nil, nil, err
	}
	select {
	case srv := <-ch:
		return srv, cli, nil
	case <-time.After(5 * time.Second):
		return nil, nil, fmt.Errorf("accept timed out")
	}
}

func (r *rawClient) walk(tb testing.TB, fid, newfid uint32, names ...string) {
	r.begin(110)
	r.u32(fid)
	r.u32(newfid)
	r.req = binary.LittleEndian.AppendUint16(r.req, uint16(len(names)))
	for _, n := range names {
		r.str(n)
	}
	r.rpc(tb)
}

func (r *rawClient) open(tb testing.TB, fid uint32) {
	r.begin(12)
	r.u32(fid)
	r.u32(0)
	r.rpc(tb)
}

func (r *rawClient) clunk(tb testing.TB, fid uint32) {
	r.begin(120)
	r.u32(fid)
	r.rpc(tb)
}

// list lists the directory at names and returns the number of entries.
func (r *rawClient) list(tb testing.TB, names ...string) int {
	r.walk(tb, 0, 1, names...)
	r.open(tb, 1)
	n := 0
	off := uint64(0)
	for {
		r.begin(40)
		r.u32(1)
		r.u64(off)
		r.u32(r.msize - 24) // what diod's client asks for (P9_IOHDRSZ)
		_, body := r.rpc(tb)
		cnt := binary.LittleEndian.Uint32(body)
		if cnt == 0 {
			break
		}
		for b := body[4 : 4+cnt]; len(b) > 0; {
			off = binary.LittleEndian.Uint64(b[13:])
			nl := int(binary.LittleEndian.Uint16(b[22:]))
			b = b[24+nl:]
			n++
		}
	}
	r.clunk(tb, 1)
	return n
}

func benchTree(home string) tree.Dir {
	return tree.New(tree.Config{Roots: map[string]*saferoot.Root{"dsh": saferoot.New(home)}, PID: 1, Start: time.Now()})
}

// servePaths are the two ways of serving compared: the fork on the socket
// itself (splice), and through a writer that hides it (read and copy).
var servePaths = []struct {
	name string
	dial func(testing.TB, tree.Dir, uint32) *rawClient
}{{"splice", dial}, {"copy", func(tb testing.TB, root tree.Dir, msize uint32) *rawClient {
	return dialWith(tb, root, msize, false)
}}}

func BenchmarkListing(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, msize := range []uint32{64 << 10, 1 << 20} {
			for _, sp := range servePaths {
				b.Run(fmt.Sprintf("entries=%d/msize=%dK/%s", n, msize>>10, sp.name), func(b *testing.B) {
					home := benchHome(b, n)
					r := sp.dial(b, benchTree(home), msize)
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if got := r.list(b, "dsh", "dir"); got != n {
							b.Fatalf("listed %d, want %d", got, n)
						}
					}
					b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
				})
			}
		}
	}
}

// BenchmarkRead reads a 4 MiB file whole with Treads of msize-24 bytes.
func BenchmarkRead(b *testing.B) {
	for _, msize := range []uint32{64 << 10, 1 << 20} {
		for _, sp := range servePaths {
			b.Run(fmt.Sprintf("msize=%dK/%s", msize>>10, sp.name), func(b *testing.B) {
				home := benchHome(b, 10)
				r := sp.dial(b, benchTree(home), msize)
				b.ReportAllocs()
				b.SetBytes(4 << 20)
				for b.Loop() {
					r.walk(b, 0, 1, "dsh", "big")
					r.open(b, 1)
					total := 0
					for off := uint64(0); ; {
						r.begin(116)
						r.u32(1)
						r.u64(off)
						r.u32(r.msize - 24)
						_, body := r.rpc(b)
						cnt := binary.LittleEndian.Uint32(body)
						if cnt == 0 {
							break
						}
						off += uint64(cnt)
						total += int(cnt)
					}
					r.clunk(b, 1)
					if total != 4<<20 {
						b.Fatalf("read %d", total)
					}
				}
			})
		}
	}
}

// BenchmarkWalk walks to a file two levels down, stats it and clunks it.
func BenchmarkWalk(b *testing.B) {
	home := benchHome(b, 10)
	r := dial(b, benchTree(home), 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		r.walk(b, 0, 1, "dsh", "big")
		r.begin(24) // Tgetattr
		r.u32(1)
		r.u64(0x3fff)
		r.rpc(b)
		r.clunk(b, 1)
	}
}
