package fusefs

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// TestInoMap: within one connection a qid path keeps its number; two
// connections (two hosts, or one host dialed twice) never share one, even
// for the same path; and no number is the mount root's (1).
func TestInoMap(t *testing.T) {
	var next atomic.Uint64
	a, b := newInoMap(&next), newInoMap(&next)
	seen := map[uint64]string{}
	for _, tc := range []struct {
		name string
		m    *inoMap
		path uint64
	}{
		{"a/0", a, 0}, {"a/1", a, 1}, {"a/big", a, 1 << 63},
		{"b/0", b, 0}, {"b/1", b, 1}, {"b/big", b, 1 << 63},
	} {
		ino := tc.m.get(tc.path)
		if ino <= 1 {
			t.Errorf("%s: inode %d, reserved", tc.name, ino)
		}
		if other, dup := seen[ino]; dup {
			t.Errorf("%s and %s share inode %d", tc.name, other, ino)
		}
		seen[ino] = tc.name
		if again := tc.m.get(tc.path); again != ino {
			t.Errorf("%s: inode %d, then %d", tc.name, ino, again)
		}
	}
}

// TestDialWithin: a dial that does not answer in time is given up on at
// the timeout (the host loop goes on to its backoff), and a dial's own
// failure comes back as it is.
func TestDialWithin(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	_, _, err := dialWithin(func() (*client.Client, func(), error) {
		<-release
		return nil, nil, errors.New("late")
	}, 100*time.Millisecond)
	if took := time.Since(start); err == nil || took > 2*time.Second {
		t.Errorf("a dial that hangs: %v after %v, want a timeout after 100ms", err, took)
	}
	want := errors.New("refused")
	if _, _, err := dialWithin(func() (*client.Client, func(), error) { return nil, nil, want }, time.Second); err != want {
		t.Errorf("a failed dial: %v, want %v", err, want)
	}
}
