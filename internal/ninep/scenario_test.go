package ninep

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/ninep/proto"
)

// The behaviours both forks implement, each in its own place (p9fork and
// srv9pfork PATCHES): flush order, per-request cancel, the bounds, the
// byte budget, the Tversion reset, the order of a fid's set-up. Each is
// one scenario below, written once as a transcript and played in each
// dialect through Serve, as the daemon serves a connection.
//
// A transcript is one step a line:
//
//	> op tag args    send a request (op: version, attach, walk, open,
//	                 stat, read, clunk, flush; args as in send below)
//	< op tag [x]     expect the reply to tag (none for version): op, or "error" with the
//	                 errno x a Linux client sees; "read" may name a word
//	                 the data holds
//	<* ...           a group of replies expected in any order
//	blocked N        wait until N more reads of "block" are waiting
//	released         wait until one waiting read has been released
//	idle             sleep three idle timeouts
//	hangup           close the client's end
//	eof              expect the server to close the connection
//
// Every wait fails after 10 s.

// scenario is one transcript and the connection it is played on.
type scenario struct {
	name string
	// block: the root holds the file "block", whose reads wait (blockDir);
	// otherwise testConn's tree (dsh/f holds "hello\n").
	block  bool
	msize  uint32
	idle   time.Duration
	budget int64 // the connection's pool; 0: Serve's default
	script string
}

const scenarioIdle = 200 * time.Millisecond

var scenarios = []scenario{
	{name: "flush-order", block: true, script: `
> walk 2 0 1 block
< walk 2
> open 3 1
< open 3
> read 4 1
blocked 1
> stat 5 1
< stat 5
> flush 6 4
released
< error 4 EINTR
< flush 6
> flush 7 77
< flush 7
`},
	{name: "hangup-releases-read", block: true, script: `
> walk 2 0 1 block
< walk 2
> open 3 1
< open 3
> read 4 1
blocked 1
hangup
released
`},
	{name: "version-reset", block: true, script: `
> walk 2 0 1 block
< walk 2
> open 3 1
< open 3
> read 4 1
blocked 1
> version
released
< version
> stat 5 1
< error 5 EBADF
> attach 6 0
< attach 6
> attach 7 1
< attach 7
`},
	{name: "blocking-reads-bound", block: true, script: `
> walk 2 0 1 block
< walk 2
> open 3 1
< open 3
` + repeat(maxBlockingReads, "> read %d 1\n", 100) + fmt.Sprintf("blocked %d\n", maxBlockingReads) +
		repeat(2*maxRequests, "> stat 5 0\n< stat 5\n") + `
> read 6 1
< error 6 EAGAIN
> flush 7 100
released
< error 100 EINTR
< flush 7
> read 8 1
blocked 1
> stat 9 0
< stat 9
`},
	{name: "idle-timeout", block: true, idle: scenarioIdle, script: `
> walk 2 0 1 block
< walk 2
> open 3 1
< open 3
> read 4 1
blocked 1
idle
> stat 5 0
< stat 5
> flush 6 4
released
< error 4 EINTR
< flush 6
eof
`},
	// The attach holds one fid's bytes of four.
	{name: "fids-bound-by-bytes", budget: 4 * fileCost, script: `
> walk 2 0 1
< walk 2
> walk 3 0 2
< walk 3
> walk 4 0 3
< walk 4
> walk 5 0 4
< error 5 EMFILE
> clunk 6 2
< clunk 6
> walk 7 0 4
< walk 7
`},
	// A read buffer the pool cannot hold is refused; a smaller one is
	// not. (/pid: a host file's reads may be spliced, holding no buffer.)
	{name: "read-buffer-budget", msize: 1 << 16, budget: 32 << 10, script: `
> walk 2 0 1 pid
< walk 2
> open 3 1
< open 3
> read 4 1 65536
< error 4 ENOMEM
> read 5 1 100
< read 5 1
`},
	// A pipelined Topen and Tread of a fid run after the Twalk that makes it.
	{name: "fid-setup-order", script: "" + repeatSetup(50)},
}

// repeat formats line n times with tags from the optional first tag up.
func repeat(n int, line string, tag ...int) string {
	var b strings.Builder
	for i := range n {
		if len(tag) > 0 {
			fmt.Fprintf(&b, line, tag[0]+i)
		} else {
			b.WriteString(line)
		}
	}
	return b.String()
}

func repeatSetup(n int) string {
	var send, want strings.Builder
	for i := range n {
		fid, tag := 10+i, 10+3*i
		fmt.Fprintf(&send, "> walk %d 0 %d dsh f\n> open %d %d\n> read %d %d\n", tag, fid, tag+1, fid, tag+2, fid)
		fmt.Fprintf(&want, "<* walk %d\n<* open %d\n<* read %d hello\n", tag, tag+1, tag+2)
	}
	return send.String() + want.String()
}

// dialect is how one dialect spells the scenarios' requests and replies.
type dialect struct {
	name    string
	version string
	attach  func(tag uint16, fid uint32) []byte
	open    func(tag uint16, fid uint32) []byte
	stat    func(tag uint16, fid uint32) []byte
	// rtype is the reply type of each op but error.
	rtype map[string]uint8
	// errno decodes an error reply, or returns false if r is none.
	errno func(r reply) (linux.Errno, bool)
}

// errnoOf9 is how Linux's v9fs (net/9p/error.c) turns the 9P2000 error
// strings these scenarios meet into errno.
var errnoOf9 = map[string]linux.Errno{
	"interrupted":                      linux.EINTR,
	"unknown fid":                      linux.EBADF,
	"too many open files":              linux.EMFILE,
	"resource temporarily unavailable": linux.EAGAIN,
	"cannot allocate memory":           linux.ENOMEM,
}

var dialects = []dialect{
	{
		name: "9P2000.L", version: proto.Version2000L,
		attach: func(tag uint16, fid uint32) []byte {
			return frame(proto.Tattach, tag, u32(fid), u32(proto.NoFid), str("u"), str(""), u32(0))
		},
		open: func(tag uint16, fid uint32) []byte { return frame(proto.Tlopen, tag, u32(fid), u32(0)) },
		stat: func(tag uint16, fid uint32) []byte { return frame(proto.Tgetattr, tag, u32(fid), u64(0x7ff)) },
		rtype: map[string]uint8{"version": proto.Rversion, "attach": proto.Rattach, "walk": proto.Rwalk,
			"open": proto.Rlopen, "stat": proto.Rgetattr, "read": proto.Rread, "clunk": proto.Rclunk, "flush": proto.Rflush},
		errno: func(r reply) (linux.Errno, bool) {
			if r.typ != proto.Rlerror || len(r.body) < 4 {
				return 0, false
			}
			return linux.Errno(binary.LittleEndian.Uint32([]byte(r.body))), true
		},
	},
	{
		name: "9P2000", version: proto.Version2000,
		attach: func(tag uint16, fid uint32) []byte {
			return frame(proto.Tattach, tag, u32(fid), u32(proto.NoFid), str("u"), str(""))
		},
		open: func(tag uint16, fid uint32) []byte { return frame(proto.Topen, tag, u32(fid), []byte{0}) },
		stat: func(tag uint16, fid uint32) []byte { return frame(proto.Tstat, tag, u32(fid)) },
		rtype: map[string]uint8{"version": proto.Rversion, "attach": proto.Rattach, "walk": proto.Rwalk,
			"open": proto.Ropen, "stat": proto.Rstat, "read": proto.Rread, "clunk": proto.Rclunk, "flush": proto.Rflush},
		errno: func(r reply) (linux.Errno, bool) {
			if r.typ != proto.Rerror || len(r.body) < 2 {
				return 0, false
			}
			msg := r.body[2:]
			if e, ok := errnoOf9[msg]; ok {
				return e, true
			}
			return linux.EIO, true
		},
	},
}

var errnoNames = map[string]linux.Errno{"EINTR": linux.EINTR, "EBADF": linux.EBADF, "EMFILE": linux.EMFILE,
	"EAGAIN": linux.EAGAIN, "ENOMEM": linux.ENOMEM, "ENOENT": linux.ENOENT, "EIO": linux.EIO}

func TestScenarios(t *testing.T) {
	for _, d := range dialects {
		for _, s := range scenarios {
			t.Run(d.name+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				play(t, d, s)
			})
		}
	}
}

// play plays s in d on a fresh connection, after a Tversion and a
// Tattach of fid 0 (tag 1).
func play(t *testing.T, d dialect, s scenario) {
	h := newBlockHandle()
	h.started, h.released = make(chan struct{}, 64), make(chan error, 64)
	cfg := testConn(t)
	if s.block {
		cfg.Root = blockDir{h}
	}
	if s.msize == 0 {
		s.msize = 8192
	}
	cfg.MaxMsize, cfg.IdleTimeout = s.msize, s.idle
	if s.budget > 0 {
		cfg.Budget = budget.New("scenario", s.budget)
	}
	srv, cli := connPair(t)
	done := make(chan struct{})
	go func() { defer close(done); serveConn(t, cfg, srv) }()
	defer func() {
		cli.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the server did not finish 10 s after the client hung up")
		}
		if cfg.Budget != nil {
			if u := cfg.Budget.Used(); u != 0 {
				t.Errorf("the connection ended holding %d bytes of its pool", u)
			}
		}
	}()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	version := frame(proto.Tversion, proto.NoTag, u32(s.msize), str(d.version))
	cli.Write(version)
	expect(t, d, readReply(t, cli), "version", proto.NoTag, "")
	cli.Write(d.attach(1, 0))
	expect(t, d, readReply(t, cli), "attach", 1, "")

	lines := strings.Split(strings.TrimSpace(s.script), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case ">":
			cli.Write(request(t, d, version, f[1:]))
		case "<":
			r := readReply(t, cli)
			if f[1] == "version" {
				expect(t, d, r, "version", proto.NoTag, "")
				break
			}
			tag, _ := strconv.Atoi(f[2])
			expect(t, d, r, f[1], uint16(tag), strings.Join(f[3:], " "))
		case "<*":
			want := map[uint16][]string{}
			for ; i < len(lines) && strings.HasPrefix(lines[i], "<* "); i++ {
				g := strings.Fields(lines[i])
				tag, _ := strconv.Atoi(g[2])
				want[uint16(tag)] = g[1:]
			}
			i--
			for range len(want) {
				r := readReply(t, cli)
				w, ok := want[r.tag]
				if !ok {
					t.Fatalf("%s: reply to tag %d, not one of the group", line, r.tag)
				}
				delete(want, r.tag)
				expect(t, d, r, w[0], r.tag, strings.Join(w[2:], " "))
			}
		case "blocked":
			n, _ := strconv.Atoi(f[1])
			for range n {
				select {
				case <-h.started:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: a read did not wait within 10 s", line)
				}
			}
		case "released":
			select {
			case <-h.released:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no read released within 10 s", line)
			}
		case "idle":
			time.Sleep(3 * s.idle)
		case "hangup":
			cli.Close()
		case "eof":
			if _, err := proto.ReadFrame(cli, s.msize); err != io.EOF {
				t.Fatalf("%s: the client reads %v, want EOF", line, err)
			}
		default:
			t.Fatalf("unknown step %q", line)
		}
	}
}

// request is the frame of one "> op tag args" step.
func request(t *testing.T, d dialect, version []byte, f []string) []byte {
	t.Helper()
	n := func(i int) uint32 {
		v, err := strconv.ParseUint(f[i], 10, 32)
		if err != nil {
			t.Fatalf("%v: field %d: %v", f, i, err)
		}
		return uint32(v)
	}
	if f[0] == "version" {
		return version
	}
	tag := uint16(n(1))
	switch f[0] {
	case "attach":
		return d.attach(tag, n(2))
	case "walk":
		body := [][]byte{u32(n(2)), u32(n(3)), u16(uint16(len(f) - 4))}
		for _, name := range f[4:] {
			body = append(body, str(name))
		}
		return frame(proto.Twalk, tag, body...)
	case "open":
		return d.open(tag, n(2))
	case "stat":
		return d.stat(tag, n(2))
	case "read":
		count := uint32(100)
		if len(f) > 3 {
			count = n(3)
		}
		return frame(proto.Tread, tag, u32(n(2)), u64(0), u32(count))
	case "clunk":
		return frame(proto.Tclunk, tag, u32(n(2)))
	case "flush":
		return frame(proto.Tflush, tag, u16(uint16(n(2))))
	}
	t.Fatalf("unknown request %v", f)
	return nil
}

// expect checks r against "op tag arg" of a "<" step.
func expect(t *testing.T, d dialect, r reply, op string, tag uint16, arg string) {
	t.Helper()
	if r.tag != tag {
		t.Fatalf("< %s %d %s: got type %d tag %d %q", op, tag, arg, r.typ, r.tag, r.body)
	}
	if op == "error" {
		e, ok := d.errno(r)
		if !ok || e != errnoNames[arg] {
			t.Fatalf("< error %d %s: got type %d %q (errno %d)", tag, arg, r.typ, r.body, e)
		}
		return
	}
	if r.typ != d.rtype[op] {
		t.Fatalf("< %s %d: got type %d %q", op, tag, r.typ, r.body)
	}
	if op == "read" && !strings.Contains(r.body, arg) {
		t.Fatalf("< read %d %s: got %q", tag, arg, r.body)
	}
}
