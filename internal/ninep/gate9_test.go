package ninep

import (
	"testing"
	"time"

	"9fans.net/go/plan9"
)

// TestGate9Pipelined: a 9P2000 client pipelines Twalk, Topen and Tread of
// each new fid without waiting for a reply, 200 times on one connection.
// srv9p serves them concurrently; the gate holds the Topen and Tread until
// the fid's walk (then its open) is answered, so every read returns the
// file (and go test -race sees no race in srv9p's fid state; with the gate
// removed it reports srv9p's Walk against its open).
func TestGate9Pipelined(t *testing.T) {
	cfg := testConn(t)
	var in []byte
	add := func(f *plan9.Fcall) {
		b, err := f.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, b...)
	}
	add(&plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 65536, Version: "9P2000"})
	add(&plan9.Fcall{Type: plan9.Tattach, Tag: 1, Fid: 0, Afid: plan9.NOFID, Uname: "u"})
	const rounds = 200
	for i := range rounds {
		fid := uint32(10 + i)
		tag := uint16(2 + 3*i) // every request its own tag: all may be in flight
		add(&plan9.Fcall{Type: plan9.Twalk, Tag: tag, Fid: 0, Newfid: fid, Wname: []string{"dsh", "f"}})
		add(&plan9.Fcall{Type: plan9.Topen, Tag: tag + 1, Fid: fid, Mode: plan9.OREAD})
		add(&plan9.Fcall{Type: plan9.Tread, Tag: tag + 2, Fid: fid, Offset: 0, Count: 100})
	}
	// Keep the connection open until every reply is in: srv9p stops
	// writing at EOF, so a half-close would drop the last replies.
	srv, cli := connPair(t)
	done := make(chan struct{})
	go func() { defer close(done); serveConn(t, cfg, srv) }()
	go cli.Write(in)
	cli.SetReadDeadline(time.Now().Add(20 * time.Second))
	reads := 0
	for n := 0; n < 2+3*rounds; n++ {
		f, err := plan9.ReadFcall(cli)
		if err != nil {
			t.Fatalf("after %d replies: %v", n, err)
		}
		switch f.Type {
		case plan9.Rerror:
			t.Errorf("tag %d: %s", f.Tag, f.Ename)
		case plan9.Rread:
			if string(f.Data) != "hello\n" {
				t.Errorf("read %q", f.Data)
			}
			reads++
		}
	}
	cli.Close()
	<-done
	if reads != rounds {
		t.Errorf("%d reads answered with the file, want %d", reads, rounds)
	}
}
