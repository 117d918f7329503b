package prochelper

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/proc"
)

// FuzzRequests feeds arbitrary bytes to a live helper connection. The
// helper must answer only in well-formed replies (a status it defines and
// a length that fits MaxReply, followed by that many bytes) or close, and
// it must still answer a good request on a new connection afterwards.
func FuzzRequests(f *testing.F) {
	for _, seed := range [][]byte{
		{'c', 1, 0, 0, 0},
		{'e', 1, 0, 0, 0, 'f', 1, 0, 0, 0},
		{'p', 0, 0, 0, 0},
		{'c', 0, 0, 0, 0},
		{'x'},
		{'f', 0xff, 0xff, 0xff, 0x7f},
		{'x', 1, 0, 0, 0, 'n', 1, 0, 0, 0, 't', 1, 0, 0, 0},
		{'m', 1, 0, 0, 0, 'r', 0, 0, 0, 0},
		{'r', 1, 0, 0, 0},
		{'p', 1, 0, 0, 0},
		{},
	} {
		f.Add(seed)
	}
	sock := f.TempDir() + "/helper"
	l, err := net.Listen("unix", sock)
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Server{Procs: proc.New("/proc"), UID: uint32(os.Getuid())}
	go s.Serve(ctx, l, 0)
	good := Dial(sock)
	defer good.Close()
	agent := candidate(f, f.TempDir(), []string{"ZMX_SESSION=fuzz"}).Process.Pid

	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(in); err != nil {
			t.Fatal(err)
		}
		c.(*net.UnixConn).CloseWrite()
		replies := 0
		for {
			var h [5]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				if err == io.EOF {
					break
				}
				t.Fatalf("after %d replies: %v", replies, err)
			}
			n := binary.LittleEndian.Uint32(h[1:])
			if h[0] > stErr || n > MaxReply {
				t.Fatalf("malformed reply header %v", h)
			}
			if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
				t.Fatalf("short reply body: %v", err)
			}
			replies++
		}
		// Never more replies than whole requests sent.
		if replies > len(in)/5 {
			t.Fatalf("%d replies to %d bytes", replies, len(in))
		}
		if _, err := good.Cwd(agent); err != nil {
			t.Fatalf("helper no longer answers: %v", err)
		}
	})
}
