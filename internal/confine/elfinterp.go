package confine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// elfInterp returns the program interpreter an ELF executable names in its
// PT_INTERP header (the dynamic loader), "" for a static executable or a
// file that is not an ELF executable this can read. Only the ELF header
// and the program headers are read: debug/elf would do the same but links
// in its section, DWARF and decompression code, about 80 KB of text the
// daemon would carry resident for this one read.
func elfInterp(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil // as for any other format: nothing more is known
	}
	defer f.Close()
	var h [64]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:4]) != "\x7fELF" {
		return "", nil
	}
	var bo binary.ByteOrder
	switch h[5] {
	case 1:
		bo = binary.LittleEndian
	case 2:
		bo = binary.BigEndian
	default:
		return "", nil
	}
	var phoff uint64
	var phentsize, phnum uint16
	switch h[4] {
	case 1: // ELFCLASS32
		phoff, phentsize, phnum = uint64(bo.Uint32(h[28:])), bo.Uint16(h[42:]), bo.Uint16(h[44:])
	case 2: // ELFCLASS64
		phoff, phentsize, phnum = bo.Uint64(h[32:]), bo.Uint16(h[54:]), bo.Uint16(h[56:])
	default:
		return "", nil
	}
	const maxPhnum = 0xffff
	if phentsize < 32 || phnum == 0 || phnum == maxPhnum || phoff > 1<<32 {
		return "", nil // no program headers, or more than the header can count
	}
	ph := make([]byte, int(phentsize)*int(phnum))
	if _, err := f.ReadAt(ph, int64(phoff)); err != nil {
		return "", nil
	}
	for i := 0; i < int(phnum); i++ {
		p := ph[i*int(phentsize):]
		if bo.Uint32(p) != 3 { // PT_INTERP
			continue
		}
		var off, size uint64
		if h[4] == 1 {
			off, size = uint64(bo.Uint32(p[4:])), uint64(bo.Uint32(p[16:]))
		} else {
			if phentsize < 56 {
				return "", nil
			}
			off, size = bo.Uint64(p[8:]), bo.Uint64(p[32:])
		}
		// The kernel refuses an interpreter path longer than PATH_MAX.
		if size < 2 || size > unix.PathMax || off > 1<<32 {
			return "", fmt.Errorf("%s: PT_INTERP of %d bytes", path, size)
		}
		b := make([]byte, size)
		if _, err := f.ReadAt(b, int64(off)); err != nil {
			return "", fmt.Errorf("%s: PT_INTERP: %w", path, err)
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return string(b), nil
	}
	return "", nil
}
