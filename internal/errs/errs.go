// Package errs classifies the errors of every layer by Kind, so that the wire
// edge can translate them to errno with one table and never by message text.
//
// The shape follows upspin's errors package: an operation name, a kind, an
// optional path, and the underlying error. Kinds are never reordered; the
// errno table in package ninep and the 9P2000 string table depend on them.
package errs

import (
	"errors"
	"fmt"
)

// Kind says what class of failure an error is.
type Kind uint8

const (
	Other       Kind = iota // unclassified: EIO on the wire
	NotExist                // absent, vanished, symlink, fifo, socket, device: ENOENT
	Private                 // excluded (credential-shaped): ENOENT, because existence is the secret
	Invalid                 // malformed name or argument: EINVAL
	Permission              // not allowed for this peer: EPERM
	ReadOnly                // a mutation of the read-only tree: EROFS
	NotDir                  // a directory operation on a file: ENOTDIR
	IsDir                   // a file operation on a directory: EISDIR
	Exist                   // the name is taken: EEXIST
	Busy                    // something is already in progress: EBUSY
	IO                      // the operation failed underneath: EIO
	Interrupted             // cancelled by a flush or a hang-up: EINTR
	NoMem                   // over a byte budget (rule 10): ENOMEM
)

var kindNames = [...]string{
	Other:       "other",
	NotExist:    "does not exist",
	Private:     "does not exist",
	Invalid:     "invalid argument",
	Permission:  "permission denied",
	ReadOnly:    "read-only file system",
	NotDir:      "not a directory",
	IsDir:       "is a directory",
	Exist:       "already exists",
	Busy:        "busy",
	IO:          "i/o error",
	Interrupted: "interrupted",
	NoMem:       "out of memory",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Error is an error with an operation, a kind and an optional path.
type Error struct {
	Op   string // the operation, "saferoot.Open"
	Kind Kind
	Path string // the path inside the tree or root, if any
	Err  error  // the underlying error, if any
}

func (e *Error) Error() string {
	s := e.Op
	if e.Path != "" {
		s += " " + e.Path
	}
	s += ": " + e.Kind.String()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// E builds an *Error.
func E(op string, kind Kind, path string, err error) error {
	return &Error{Op: op, Kind: kind, Path: path, Err: err}
}

// KindOf returns the kind of the outermost classified error in err's chain,
// or Other when there is none. A nil error has kind Other.
func KindOf(err error) Kind {
	var e *Error
	for err != nil {
		if errors.As(err, &e) {
			if e.Kind != Other {
				return e.Kind
			}
			err = e.Err
			continue
		}
		return Other
	}
	return Other
}

// Is reports whether err has the given kind.
func Is(err error, k Kind) bool { return KindOf(err) == k }

// Plain is err for a person at a terminal or in the journal: the path and
// what went wrong, without the operation names that help a developer
// ("saferoot.OpenAnchor"). An unclassified cause is kept; a classified one
// is said by its kind alone, which the cause would only repeat.
func Plain(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	s := e.Kind.String()
	if e.Kind == Other || e.Kind == IO {
		if e.Err != nil {
			s = Plain(e.Err)
		}
	}
	if e.Path != "" {
		return e.Path + ": " + s
	}
	return s
}
