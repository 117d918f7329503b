package p9

// A client may pipeline a Tlopen and requests on the same fid (a Tread
// right behind it) without waiting for the Rlopen, or a Twalk and requests
// on its new fid. Requests run concurrently, so the Tread could run before
// the open had marked the fid opened, and be answered EINVAL as if the
// client had never opened it (or EBADF before the walk made the fid). So a
// request on a fid whose set-up (Tattach, Twalk, Tlopen, Tlcreate) is still
// being handled waits for that to finish. The reader registers the set-up
// before it reads the next frame, so every request sent after it sees it;
// requests on other fids do not wait.

// fidOf returns the fid a request acts on, for the requests that act on an
// opened fid (or open or release one).
func fidOf(m message) (fid, bool) {
	switch t := m.(type) {
	case *tread:
		return t.fid, true
	case *twrite:
		return t.fid, true
	case *treaddir:
		return t.Directory, true
	case *tlopen:
		return t.fid, true
	case *tclunk:
		return t.fid, true
	case *tremove:
		return t.fid, true
	case *tgetattr:
		return t.fid, true
	case *tsetattr:
		return t.fid, true
	case *tfsync:
		return t.fid, true
	case *twalk:
		return t.fid, true
	case *twalkgetattr:
		return t.fid, true
	case *tlock:
		return t.fid, true
	case *tlcreate:
		return t.fid, true
	}
	return 0, false
}

// setupOf returns the fid a request makes or opens.
func setupOf(m message) (fid, bool) {
	switch t := m.(type) {
	case *tlopen:
		return t.fid, true
	case *tlcreate:
		return t.fid, true
	case *twalk:
		return t.newFID, true
	case *twalkgetattr:
		return t.newFID, true
	case *tattach:
		return t.fid, true
	}
	return 0, false
}

// orderOnFid makes the request m, just read, wait for a set-up of its fid
// still in flight, and registers m if it sets a fid up. Called by the
// reader, in the order of the requests.
func (cs *connState) orderOnFid(m message, st *tagState) {
	f, uses := fidOf(m)
	nf, sets := setupOf(m)
	if !uses && !sets {
		return
	}
	cs.tagMu.Lock()
	defer cs.tagMu.Unlock()
	if uses {
		st.after = cs.opening[f]
	}
	if sets {
		if cs.opening == nil {
			cs.opening = make(map[fid]chan struct{})
		}
		st.opening = make(chan struct{})
		st.openFid = nf
		cs.opening[nf] = st.opening
	}
}

// opened ends the wait of the requests behind the set-up st.
func (cs *connState) opened(st *tagState) {
	if st.opening == nil {
		return
	}
	cs.tagMu.Lock()
	if cs.opening[st.openFid] == st.opening {
		delete(cs.opening, st.openFid)
	}
	cs.tagMu.Unlock()
	close(st.opening)
}
