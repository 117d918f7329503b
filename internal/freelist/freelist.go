// Package freelist keeps a few values for reuse between requests.
//
// It is what a sync.Pool would be if the collector left it alone: a
// daemon that allocates about a collection's worth per request (a table
// read of hundreds of agents, a listing of a large directory) finds a
// sync.Pool empty at almost every request, and regrows what it meant to
// keep. A List keeps at most Max values, until they are taken.
package freelist

import "sync"

// List is a bounded stack of values kept for reuse; its zero value keeps
// nothing (set Max). It is safe for concurrent use.
type List[T any] struct {
	Max int

	mu    sync.Mutex
	items []T
}

// Get takes the value put last, if any.
func (l *List[T]) Get() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero T
	n := len(l.items)
	if n == 0 {
		return zero, false
	}
	x := l.items[n-1]
	l.items[n-1] = zero
	l.items = l.items[:n-1]
	return x, true
}

// Put keeps x, unless Max values are kept already; it reports whether x
// was kept. The caller empties x first: whatever x still refers to stays
// alive while it is kept.
func (l *List[T]) Put(x T) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.items) >= l.Max {
		return false
	}
	l.items = append(l.items, x)
	return true
}
