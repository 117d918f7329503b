package ninep

import (
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// readOnly refuses every mutation with EROFS. It is embedded in file, so the
// tree is read-only by construction: there is no code path from a create,
// remove, rename, link or setattr to the host.
type readOnly struct{}

func (readOnly) FSync() error { return linux.EROFS }
func (readOnly) Create(string, p9.OpenFlags, p9.FileMode, p9.UID, p9.GID) (p9.File, p9.QID, uint32, error) {
	return nil, p9.QID{}, 0, linux.EROFS
}
func (readOnly) Mkdir(string, p9.FileMode, p9.UID, p9.GID) (p9.QID, error) {
	return p9.QID{}, linux.EROFS
}
func (readOnly) Symlink(string, string, p9.UID, p9.GID) (p9.QID, error) {
	return p9.QID{}, linux.EROFS
}
func (readOnly) Link(p9.File, string) error { return linux.EROFS }
func (readOnly) Mknod(string, p9.FileMode, uint32, uint32, p9.UID, p9.GID) (p9.QID, error) {
	return p9.QID{}, linux.EROFS
}
func (readOnly) Rename(p9.File, string) error           { return linux.EROFS }
func (readOnly) RenameAt(string, p9.File, string) error { return linux.EROFS }
func (readOnly) UnlinkAt(string, uint32) error          { return linux.EROFS }
