package saferoot

import (
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/9harness/9harness/internal/errs"
)

// maxName is NAME_MAX on Linux: no directory entry has a longer name.
const maxName = 255

// ValidName reports whether name can be a single path component: non-empty,
// at most 255 bytes, no '/', no NUL, and not "." or "..". It refuses with
// kind Invalid before the filesystem is touched, so client bytes never form
// anything but one component.
func ValidName(name string) error {
	const op = "saferoot.ValidName"
	switch {
	case name == "", name == ".", name == "..":
		return errs.E(op, errs.Invalid, name, nil)
	case len(name) > maxName:
		return errs.E(op, errs.Invalid, name, nil)
	case strings.IndexByte(name, '/') >= 0, strings.IndexByte(name, 0) >= 0:
		return errs.E(op, errs.Invalid, name, nil)
	}
	return nil
}

// CheckRel validates a relative path: "" (the root itself), or components
// separated by single '/', with no leading or trailing slash and no empty
// component, each a ValidName (else kind Invalid) and not Excluded (else kind
// Private). Every operation of Root calls it again (as Root.CheckRel, which
// also knows the root's slug directories), whatever its caller did.
func CheckRel(rel string) error { return checkRelAt("saferoot.CheckRel", rel, nil) }

// checkRelAt is CheckRel where slug(dir) says whether the entries of the
// directory dir (a prefix of rel) are working-directory slugs; nil means
// none are.
func checkRelAt(op, rel string, slug func(dir string) bool) error {
	if rel == "" {
		return nil
	}
	for i := 0; ; {
		comp, _, more := strings.Cut(rel[i:], "/")
		if ValidName(comp) != nil {
			return errs.E(op, errs.Invalid, rel, nil)
		}
		dir := ""
		if i > 0 {
			dir = rel[:i-1]
		}
		if excluded(comp, slug != nil && slug(dir)) {
			return errs.E(op, errs.Private, rel, nil)
		}
		if !more {
			return nil
		}
		i += len(comp) + 1
	}
}

// Excluded reports whether name is in the credential table (credentials.go).
// An excluded name is never resolved and never listed, at any depth. It is a
// pure function of name and does not allocate for names up to 255 bytes.
//
// All rules are case-insensitive. The comparison is made on a folded copy of
// the name: ASCII letters are lowered by hand (no strings.ToLower, so the
// predicate never allocates), and the few non-ASCII code points whose case
// fold or normalisation is ASCII (ſ→s, K→k, ß→ss, ﬁ→fi, ...) are folded too,
// while Unicode default-ignorable code points (zero-width space, ...) are
// dropped. The reason is the casefolded directory (ext4, f2fs or tmpfs with
// chattr +F): there the kernel's NFD+casefold name comparison resolves
// "ſettings.json" (and, on kernels that still ignore default-ignorables,
// "sett\u200bings.json") to settings.json, so a client could name the secret
// under a spelling an ASCII-only predicate lets through. Over-excluding such
// names elsewhere costs nothing.
func Excluded(name string) bool {
	return excluded(name, false)
}

// ExcludedSlug is Excluded for a working-directory slug (see SetSlugDirs):
// the store rules alone.
func ExcludedSlug(name string) bool {
	return excluded(name, true)
}

// excludedBytes is excluded of a name in a buffer, without copying it: the
// string made here does not outlive the call, and the buffer is not written
// during it.
func excludedBytes(name []byte, slug bool) bool {
	if len(name) == 0 {
		return excluded("", slug)
	}
	return excluded(unsafe.String(unsafe.SliceData(name), len(name)), slug)
}

func excluded(name string, slug bool) bool {
	var buf [maxName + 1]byte
	f := buf[:0]
	if len(name) > len(buf) {
		f = make([]byte, 0, len(name))
	}
	f = fold(f, name)
	if len(f) == 0 {
		return false
	}
	return credential(f, slug)
}

// noMatch stands in the folded name for a code point that cannot be part of
// any (ASCII) pattern, so that it still separates what is on either side.
const noMatch = 0x80

// fold appends to dst the matching form of s: ASCII lower-cased, the
// non-ASCII code points that fold to ASCII replaced by their fold,
// default-ignorable code points dropped, anything else (and each invalid
// byte) one noMatch byte. The result is never longer than s.
func fold(dst []byte, s string) []byte {
	// The ASCII prefix, the whole name as a rule, is lowered in place of
	// appended byte by byte (the predicate runs for every listed name).
	i := 0
	if cap(dst)-len(dst) >= len(s) {
		d := dst[len(dst) : len(dst)+len(s)]
		for ; i < len(s); i++ {
			c := s[i]
			if c >= utf8.RuneSelf {
				break
			}
			d[i] = c + lowerDelta[c]
		}
		dst = dst[:len(dst)+i]
	}
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, noMatch)
			continue
		}
		if ignorable(r) {
			continue
		}
		if a := asciiFold(r); a != "" {
			dst = append(dst, a...)
			continue
		}
		dst = append(dst, noMatch)
	}
	return dst
}

// lowerDelta is what lowers an ASCII byte: 'a'-'A' for capitals, else 0.
var lowerDelta = func() (t [utf8.RuneSelf]byte) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = 'a' - 'A'
	}
	return t
}()

// asciiFold returns the ASCII string a non-ASCII rune folds or normalises to
// (Unicode full case folding, NFD, or simple lower/upper case mapping), or "".
// The list is every such code point of Unicode 14 whose image is a letter.
func asciiFold(r rune) string {
	switch r {
	case 0x00DF, 0x1E9E: // ß ẞ
		return "ss"
	case 0x0130, 0x0131: // İ ı
		return "i"
	case 0x017F: // ſ long s
		return "s"
	case 0x212A: // Kelvin sign
		return "k"
	case 0xFB00:
		return "ff"
	case 0xFB01:
		return "fi"
	case 0xFB02:
		return "fl"
	case 0xFB03:
		return "ffi"
	case 0xFB04:
		return "ffl"
	case 0xFB05, 0xFB06:
		return "st"
	}
	return ""
}

// ignorable reports whether r is a Unicode Default_Ignorable_Code_Point,
// which the kernel's utf8 casefolding of older kernels ignores in name
// comparisons (so "to\u200bken" named token there).
func ignorable(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x061C,
		0x115F <= r && r <= 0x1160,
		0x17B4 <= r && r <= 0x17B5,
		0x180B <= r && r <= 0x180F,
		0x200B <= r && r <= 0x200F,
		0x202A <= r && r <= 0x202E,
		0x2060 <= r && r <= 0x206F,
		r == 0x3164,
		0xFE00 <= r && r <= 0xFE0F,
		r == 0xFEFF, r == 0xFFA0,
		0xFFF0 <= r && r <= 0xFFF8,
		0x1BCA0 <= r && r <= 0x1BCA3,
		0x1D173 <= r && r <= 0x1D17A,
		0xE0000 <= r && r <= 0xE0FFF:
		return true
	}
	return false
}
