package ninep

import (
	"encoding/binary"
	"sort"

	"github.com/hugelgupf/p9/p9"

	"github.com/9harness/9harness/internal/tree"
)

// listing is a directory's entries in Rreaddir's wire form, one after
// another, each with its offset filled in (entry i has offset i+1, so a
// Treaddir at offset i resumes after entry i-1).
type listing struct {
	enc []byte   // qid[13] offset[8] type[1] name[s], per entry
	at  []uint32 // at[i]: where entry i starts in enc; at[len] = len(enc)
}

// direntSize is the encoded size of one entry without its name: qid[13]
// offset[8] type[1] name length[2].
const direntSize = 13 + 8 + 1 + 2

// Linux dirent types: v9fs hands the entry's type to dir_emit unchanged, so
// it must be a DT_* value, not the qid type hugelgupf's own servers put
// there.
const (
	dtDir = 4
	dtReg = 8
)

// listDir lists d once and encodes the result at its final size.
func listDir(d tree.Dir) (*listing, error) {
	// A mirrored directory is encoded straight from the listing's own
	// buffers, sized once: no slice of entries, no string of names.
	var l *listing
	i := 0
	ok, err := tree.ListEach(d, func(n, nameBytes int) {
		l = &listing{enc: make([]byte, 0, n*direntSize+nameBytes), at: make([]uint32, 0, n+1)}
	}, func(name []byte, dir bool, path uint64) {
		addEntry(l, i, name, dir, path)
		i++
	})
	if ok {
		if err != nil {
			return nil, err
		}
		l.at = append(l.at, uint32(len(l.enc)))
		return l, nil
	}
	ents, err := tree.ListAs(d, func(e tree.Entry) tree.Entry { return e })
	if err != nil {
		return nil, err
	}
	size := 0
	for _, e := range ents {
		size += direntSize + len(e.Name)
	}
	l = &listing{enc: make([]byte, 0, size), at: make([]uint32, 0, len(ents)+1)}
	for i, e := range ents {
		addEntry(l, i, e.Name, e.Dir, e.Path)
	}
	l.at = append(l.at, uint32(len(l.enc)))
	return l, nil
}

// addEntry encodes entry i at the end of l.
func addEntry[N string | []byte](l *listing, i int, name N, dir bool, path uint64) {
	l.at = append(l.at, uint32(len(l.enc)))
	qt, dt := p9.TypeRegular, uint8(dtReg)
	if dir {
		qt, dt = p9.TypeDir, dtDir
	}
	b := l.enc
	b = append(b, uint8(qt))
	b = binary.LittleEndian.AppendUint32(b, 0) // qid version: not kept in a listing
	b = binary.LittleEndian.AppendUint64(b, path)
	b = binary.LittleEndian.AppendUint64(b, uint64(i)+1)
	b = append(b, dt)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	l.enc = append(b, name...)
}

// window is the run of whole entries from offset that fits in count bytes.
func (l *listing) window(offset uint64, count uint32) []byte {
	n := uint64(len(l.at) - 1)
	if offset >= n {
		return nil
	}
	start := l.at[offset]
	rest := l.at[offset+1:]
	// The first entry that does not fit ends the window.
	k := sort.Search(len(rest), func(i int) bool { return rest[i]-start > count })
	if k == 0 {
		return nil
	}
	end := rest[k-1]
	return l.enc[start:end:end]
}

// decodeDirents turns a window back into p9's form, for p9's own Readdir
// path. Names share one string.
func decodeDirents(b []byte) p9.Dirents {
	if len(b) == 0 {
		return nil
	}
	names := string(b)
	var out p9.Dirents
	for i := 0; i+direntSize <= len(b); {
		nl := int(binary.LittleEndian.Uint16(b[i+22:]))
		out = append(out, p9.Dirent{
			QID: p9.QID{
				Type:    p9.QIDType(b[i]),
				Version: binary.LittleEndian.Uint32(b[i+1:]),
				Path:    binary.LittleEndian.Uint64(b[i+5:]),
			},
			Offset: binary.LittleEndian.Uint64(b[i+13:]),
			Type:   p9.QIDType(b[i+21]),
			Name:   names[i+direntSize : i+direntSize+nl],
		})
		i += direntSize + nl
	}
	return out
}
