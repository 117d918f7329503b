// Package shquote quotes words for a POSIX shell, for the commands
// 9harness shows a person to paste (how to attach to a session, how to
// resume an agent by hand) and the one it sends to a remote shell (ssh's
// relay command).
package shquote

import "strings"

// Quote returns s as one word of a POSIX shell command: s itself when
// every byte is one no shell treats specially in any position, else s in
// single quotes (a quote inside written '\”). A word that would be read
// as a variable assignment at the start of a command (NAME=...) is quoted
// too, so the result means s wherever in a command it is placed.
func Quote(s string) string {
	if s != "" && plain(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word and joins them with spaces.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

// plain reports whether s needs no quotes: letters, digits and
// "_-./:@+,=" only, and not an assignment. '%' (a job at the start of a
// command in bash), '~' (a home directory at the start of a word), and
// '{', '}' (brace expansion around a ',') are quoted.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_-./:@+,=", c) >= 0:
		default:
			return false
		}
	}
	return !assignment(s)
}

// assignment reports whether s starts with NAME= (NAME a shell name).
func assignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" || '0' <= name[0] && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
