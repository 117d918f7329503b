package saferoot

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
const (
	direntIno    = 0
	direntReclen = 16
	direntType   = 18
	direntName   = 19
)

// readDirents lists the open directory fd with getdents64 until it is
// exhausted: every regular file and directory whose name is valid and not
// Excluded, in the kernel's order.
func readDirents(fd int) ([]Entry, error) {
	buf := make([]byte, 64<<10)
	var out []Entry
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		if out, err = appendDirents(out, fd, buf[:n]); err != nil {
			return nil, err
		}
	}
}

// appendDirents parses one getdents64 buffer.
func appendDirents(out []Entry, fd int, b []byte) ([]Entry, error) {
	for len(b) > 0 {
		if len(b) < direntName {
			return out, unix.EIO
		}
		reclen := int(binary.NativeEndian.Uint16(b[direntReclen:]))
		if reclen < direntName || reclen > len(b) {
			return out, unix.EIO
		}
		rec := b[:reclen]
		b = b[reclen:]
		name := rec[direntName:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		ino := binary.NativeEndian.Uint64(rec[direntIno:])
		if e, ok := classify(fd, string(name), rec[direntType], ino); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// classify decides whether a directory entry is listed. The type comes from
// d_type; only DT_UNKNOWN (some filesystems never fill it) costs an
// fstatat(AT_SYMLINK_NOFOLLOW). An entry that vanished meanwhile, or cannot be
// stat'd, is not listed.
func classify(dirfd int, name string, dtype uint8, ino uint64) (Entry, bool) {
	if ValidName(name) != nil || Excluded(name) {
		return Entry{}, false
	}
	switch dtype {
	case unix.DT_REG:
		return Entry{Name: name, Ino: ino}, true
	case unix.DT_DIR:
		return Entry{Name: name, Dir: true, Ino: ino}, true
	case unix.DT_UNKNOWN:
		var st unix.Stat_t
		for {
			err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return Entry{}, false
			}
			break
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			return Entry{Name: name, Ino: uint64(st.Ino)}, true
		case unix.S_IFDIR:
			return Entry{Name: name, Dir: true, Ino: uint64(st.Ino)}, true
		}
	}
	return Entry{}, false
}
