package freelist

import (
	"sync"
	"testing"
)

func TestList(t *testing.T) {
	var zero List[*int]
	if zero.Put(new(int)) {
		t.Error("a List with Max 0 kept a value")
	}
	l := List[*int]{Max: 2}
	if _, ok := l.Get(); ok {
		t.Fatal("an empty List gave a value")
	}
	a, b, c := new(int), new(int), new(int)
	if !l.Put(a) || !l.Put(b) {
		t.Fatal("a List under Max refused a value")
	}
	if l.Put(c) {
		t.Error("a full List kept a third value")
	}
	if x, ok := l.Get(); !ok || x != b {
		t.Errorf("Get = %p, %v; want the last put, %p", x, ok, b)
	}
	if x, ok := l.Get(); !ok || x != a {
		t.Errorf("Get = %p, %v; want %p", x, ok, a)
	}
	if _, ok := l.Get(); ok {
		t.Error("a List gave more than it was given")
	}
}

// Under -race: concurrent takers and keepers, never more than Max kept,
// every value given out at most once at a time.
func TestListConcurrent(t *testing.T) {
	l := List[*int]{Max: 4}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				x, ok := l.Get()
				if !ok {
					x = new(int)
				}
				*x++ // a value held by two goroutines at once is a race
				l.Put(x)
			}
		}()
	}
	wg.Wait()
	if n := len(l.items); n > l.Max {
		t.Errorf("%d kept, Max %d", n, l.Max)
	}
}
