package proc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// statTail is fields 3..22 of a stat line (state, ppid, ..., starttime),
// with ppid and starttime left to fill in.
const statTail = "S %d 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %d 1000 200 18446744073709551615"

// FuzzParseStat: any input. When ParseStat accepts a line, the comm is
// exactly what lies between the first '(' and the last ')', and ppid and
// starttime come from after it. (testdata/fuzz/FuzzParseStat holds a line
// with a lone '\r' field: the parser splits on spaces only, as the kernel
// writes them, so it counts as a field.)
func FuzzParseStat(f *testing.F) {
	ms, _ := filepath.Glob("../../testdata/proc/*/stat")
	for _, m := range ms {
		b, err := os.ReadFile(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("1 (a) (b)) " + fmt.Sprintf(statTail, 1, 2)))
	f.Add([]byte("1 ) (" + fmt.Sprintf(statTail, 1, 2)))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseStat(b)
		if err != nil {
			return
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open || p.Comm != string(b[open+1:end]) {
			t.Fatalf("comm %q from %q", p.Comm, b)
		}
		// ppid and starttime are fields of what follows the comm, never
		// bytes of the comm itself.
		rest := b[end+1:]
		if !bytes.Contains(rest, []byte(strconv.Itoa(p.PPID))) || !bytes.Contains(rest, []byte(strconv.FormatUint(p.Start, 10))) {
			t.Fatalf("ppid %d start %d are not in %q", p.PPID, p.Start, rest)
		}
	})
}

// FuzzParseStatComm: a hostile comm (parentheses, spaces, newlines, fake
// fields) in a well-formed line never shifts the fields after it.
func FuzzParseStatComm(f *testing.F) {
	for _, c := range []string{"bash", "a) R 1 2 3", ") (", "((((", "))))", "x\ny", "", "evil) S 999 1 1", "\x00\xff", "0123456789abcde"} {
		f.Add(c, 17, uint64(12345))
	}
	f.Fuzz(func(t *testing.T, comm string, ppid int, start uint64) {
		if ppid < 0 {
			ppid = -ppid
		}
		line := fmt.Sprintf("%d (%s) "+statTail+"\n", 4242, comm, ppid, start)
		p, err := ParseStat([]byte(line))
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if p.Comm != comm || p.PPID != ppid || p.Start != start {
			t.Fatalf("%q: got comm %q ppid %d start %d", line, p.Comm, p.PPID, p.Start)
		}
	})
}
