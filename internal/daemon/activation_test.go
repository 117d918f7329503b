package daemon

import "testing"

// listenFDs takes the descriptors only when LISTEN_PID names this very
// process (a child that inherited the variables must not take its
// parent's sockets) and LISTEN_FDS is a count.
func TestListenFDs(t *testing.T) {
	for _, c := range []struct {
		pid, nfds string
		want      int
		ok        bool
	}{
		{"100", "1", 1, true},
		{"100", "3", 3, true},
		{"101", "1", 0, false},
		{"", "1", 0, false},
		{"100x", "1", 0, false},
		{"100", "0", 0, false},
		{"100", "-1", 0, false},
		{"100", "", 0, false},
		{"100", "one", 0, false},
		{"100", "99999999", 0, false},
	} {
		n, err := listenFDs(c.pid, c.nfds, 100)
		if n != c.want || (err == nil) != c.ok {
			t.Errorf("LISTEN_PID=%q LISTEN_FDS=%q: %d, %v; want %d, ok %v", c.pid, c.nfds, n, err, c.want, c.ok)
		}
	}
}
