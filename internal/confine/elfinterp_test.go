package confine

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stdInterp is debug/elf's answer, the reference elfInterp must agree with.
func stdInterp(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return strings.TrimRight(string(b), "\x00")
		}
	}
	return ""
}

// fakeELF writes a minimal ELF file of the given class and byte order
// whose one program header is a PT_INTERP naming interp (none if "").
func fakeELF(t *testing.T, class elf.Class, bo binary.ByteOrder, interp string) string {
	t.Helper()
	hsize, phsize := 52, 32
	if class == elf.ELFCLASS64 {
		hsize, phsize = 64, 56
	}
	b := make([]byte, hsize+phsize)
	copy(b, "\x7fELF")
	b[4], b[6] = byte(class), 1
	b[5] = byte(elf.ELFDATA2LSB)
	if bo == binary.BigEndian {
		b[5] = byte(elf.ELFDATA2MSB)
	}
	bo.PutUint16(b[16:], uint16(elf.ET_EXEC))
	bo.PutUint16(b[18:], uint16(elf.EM_X86_64))
	bo.PutUint32(b[20:], 1)
	typ := elf.PT_NOTE
	if interp != "" {
		typ = elf.PT_INTERP
	}
	p := b[hsize:]
	off, size := uint64(len(b)), uint64(len(interp)+1)
	if class == elf.ELFCLASS64 {
		bo.PutUint64(b[32:], uint64(hsize))
		bo.PutUint16(b[52:], uint16(hsize))
		bo.PutUint16(b[54:], uint16(phsize))
		bo.PutUint16(b[56:], 1)
		bo.PutUint32(p, uint32(typ))
		bo.PutUint64(p[8:], off)
		bo.PutUint64(p[32:], size)
		bo.PutUint64(p[40:], size)
	} else {
		bo.PutUint32(b[28:], uint32(hsize))
		bo.PutUint16(b[40:], uint16(hsize))
		bo.PutUint16(b[42:], uint16(phsize))
		bo.PutUint16(b[44:], 1)
		bo.PutUint32(p, uint32(typ))
		bo.PutUint32(p[4:], uint32(off))
		bo.PutUint32(p[16:], uint32(size))
		bo.PutUint32(p[20:], uint32(size))
	}
	if interp != "" {
		b = append(append(b, interp...), 0)
	}
	path := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// elfInterp reads the same interpreter as debug/elf from this machine's own
// executables (dynamic, static, the loader itself, a script) and from
// both classes and byte orders.
func TestELFInterp(t *testing.T) {
	var paths []string
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/usr/bin/ldd", "/etc/passwd"} {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	if exe, err := os.Executable(); err == nil {
		paths = append(paths, exe)
	}
	dynamic := 0
	for _, p := range paths {
		got, err := elfInterp(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
		if want := stdInterp(t, p); got != want {
			t.Errorf("%s: interpreter %q, debug/elf reads %q", p, got, want)
		}
		if got != "" {
			dynamic++
		}
	}
	if dynamic == 0 {
		t.Errorf("no dynamic executable among %v: the comparison proved nothing", paths)
	}
	for _, c := range []struct {
		class elf.Class
		bo    binary.ByteOrder
	}{{elf.ELFCLASS32, binary.LittleEndian}, {elf.ELFCLASS32, binary.BigEndian}, {elf.ELFCLASS64, binary.LittleEndian}, {elf.ELFCLASS64, binary.BigEndian}} {
		for _, interp := range []string{"/lib/ld-test.so.1", ""} {
			p := fakeELF(t, c.class, c.bo, interp)
			got, err := elfInterp(p)
			if err != nil || got != interp || stdInterp(t, p) != interp {
				t.Errorf("%v %v %q: elfInterp %q %v, debug/elf %q", c.class, c.bo, interp, got, err, stdInterp(t, p))
			}
		}
	}
}

// A file cut short anywhere is no executable elfInterp can read (""), or a
// PT_INTERP it cannot read whole (an error): never a wrong interpreter.
func TestELFInterpTruncated(t *testing.T) {
	const interp = "/lib/ld-test.so.1"
	whole, err := os.ReadFile(fakeELF(t, elf.ELFCLASS64, binary.LittleEndian, interp))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cut")
	for n := range len(whole) {
		if err := os.WriteFile(path, whole[:n], 0o755); err != nil {
			t.Fatal(err)
		}
		if got, err := elfInterp(path); got != "" {
			t.Fatalf("cut at %d of %d: read %q (%v) from a part of the file", n, len(whole), got, err)
		}
	}
}
