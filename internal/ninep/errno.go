package ninep

import (
	"errors"

	"github.com/hugelgupf/p9/linux"

	"github.com/9harness/9harness/internal/errs"
)

// errnoOf is the one table that turns an error kind into the errno a
// 9P2000.L client sees. It keys on the kind, never on message text.
//
// Private maps to ENOENT and not EACCES: for a credential-shaped name, its
// existence is itself the secret.
var errnoOf = [...]linux.Errno{
	errs.Other:       linux.EIO,
	errs.NotExist:    linux.ENOENT,
	errs.Private:     linux.ENOENT,
	errs.Invalid:     linux.EINVAL,
	errs.Permission:  linux.EPERM,
	errs.ReadOnly:    linux.EROFS,
	errs.NotDir:      linux.ENOTDIR,
	errs.IsDir:       linux.EISDIR,
	errs.Exist:       linux.EEXIST,
	errs.Busy:        linux.EBUSY,
	errs.IO:          linux.EIO,
	errs.Interrupted: linux.EINTR,
	errs.NoMem:       linux.ENOMEM,
}

// Errno translates err for the wire. An error that already is a
// linux.Errno (the adapter's own refusals) passes through.
func Errno(err error) linux.Errno {
	var e linux.Errno
	if errors.As(err, &e) {
		return e
	}
	k := errs.KindOf(err)
	if int(k) < len(errnoOf) {
		return errnoOf[k]
	}
	return linux.EIO
}
