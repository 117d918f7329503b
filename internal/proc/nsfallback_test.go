package proc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

const statusTop = "Name:\tsshd\nUmask:\t0077\nState:\tS (sleeping)\nTgid:\t19187\nNgid:\t0\nPid:\t19187\nPPid:\t1\nNSpid:\t19187\nNSpgid:\t19187\n"

func TestPIDNSProof(t *testing.T) {
	for _, tc := range []struct {
		name, peer, ref string
		want            Proof
	}{
		{"both in the procfs's namespace", statusTop, "Pid:\t7\nNSpid:\t7\n", Same},
		{"peer one level down", "NSpid:\t300\t1\n", "NSpid:\t7\n", Other},
		{"reference one level down", "NSpid:\t300\n", "NSpid:\t7\t1\n", Other},
		{"peer two levels down", "NSpid:\t300\t20\t1\n", "NSpid:\t7\t3\n", Other},
		{"both one level down: maybe siblings", "NSpid:\t300\t1\n", "NSpid:\t7\t2\n", Unproven},
		{"spaces instead of tabs", "NSpid: 300\n", "NSpid:  7 \n", Same},
		{"no NSpid line (old kernel)", "Pid:\t300\n", "NSpid:\t7\n", Unproven},
		{"no NSpid line in the reference", "NSpid:\t300\n", "Pid:\t7\n", Unproven},
		{"empty NSpid line", "NSpid:\n", "NSpid:\t7\n", Unproven},
		{"two NSpid lines", "NSpid:\t300\nNSpid:\t300\n", "NSpid:\t7\n", Unproven},
		{"not a number", "NSpid:\t3x0\n", "NSpid:\t7\n", Unproven},
		{"zero pid", "NSpid:\t0\n", "NSpid:\t7\n", Unproven},
		{"negative pid", "NSpid:\t-1\n", "NSpid:\t7\n", Unproven},
		{"prefix of another field", "XNSpid:\t300\n", "NSpid:\t7\n", Unproven},
		{"empty files", "", "", Unproven},
	} {
		if got := PIDNSProof([]byte(tc.peer), []byte(tc.ref)); got != tc.want {
			t.Errorf("%s: PIDNSProof(%q, %q) = %v, want %v", tc.name, tc.peer, tc.ref, got, tc.want)
		}
	}
}

func TestUserNSProof(t *testing.T) {
	const full = "         0          0 4294967295\n"
	for _, tc := range []struct {
		name, peer, ref string
		want            Proof
	}{
		{"both the full identity map", full, full, Same},
		{"other spacing", "0 0 4294967295", "\t0\t0\t4294967295\n\n", Same},
		{"peer maps one uid", "         0       1000          1\n", full, Other},
		{"peer maps a subuid range", "0 1000 1\n1 100000 65536\n", full, Other},
		{"peer's map unwritten", "", full, Other},
		{"peer's map is full plus a line", full + "5 5 1\n", full, Other},
		{"peer's full range shifted", "0 1 4294967295\n", full, Other},
		{"peer's count short", "0 0 4294967294\n", full, Other},
		{"reference not full", full, "0 1000 1\n", Unproven},
		{"reference unwritten", full, "", Unproven},
		{"both the same partial map", "0 1000 1\n", "0 1000 1\n", Unproven},
		{"peer malformed: two fields", "0 0\n", full, Unproven},
		{"peer malformed: words", "zero zero all\n", full, Unproven},
		{"peer malformed: negative", "0 -1 1\n", full, Unproven},
		{"peer malformed: too big", "0 0 4294967296\n", full, Unproven},
		{"reference malformed", full, "0 0 4294967295 9\n", Unproven},
	} {
		if got := UserNSProof([]byte(tc.peer), []byte(tc.ref)); got != tc.want {
			t.Errorf("%s: UserNSProof(%q, %q) = %v, want %v", tc.name, tc.peer, tc.ref, got, tc.want)
		}
	}
}

func TestMntNSProof(t *testing.T) {
	const root = "21 26 0:20 / /proc rw,relatime - proc proc rw\n"
	for _, tc := range []struct {
		name, peer, ref string
		want            Proof
	}{
		{"same first line", root, root, Same},
		{"same first line, rest differs", root + "22 26 0:21 / /sys rw - sysfs sysfs rw\n", root, Same},
		{"another mount ID (a copied namespace)", "812 790 0:20 / /proc rw,relatime - proc proc rw\n", root, Other},
		{"same ID, other mount point (chroot)", "21 26 0:20 / / rw,relatime - proc proc rw\n", root, Other},
		{"same mount, other options", "21 26 0:20 / /proc ro,relatime - proc proc rw\n", root, Other},
		{"trailing space differs", "21 26 0:20 / /proc rw,relatime - proc proc rw \n", root, Other},
		{"peer empty (no mount visible)", "", root, Unproven},
		{"reference empty", root, "", Unproven},
		{"peer's line unterminated", "21 26 0:20 / /proc rw,relatime - proc proc rw", root, Unproven},
		{"no mount ID", "x 26 0:20 / /proc rw - proc proc rw\n", "x 26 0:20 / /proc rw - proc proc rw\n", Unproven},
		{"no parent ID", "21\n", "21\n", Unproven},
		{"blank first line", "\n" + root, "\n" + root, Unproven},
	} {
		if got := MntNSProof([]byte(tc.peer), []byte(tc.ref)); got != tc.want {
			t.Errorf("%s: MntNSProof(%q, %q) = %v, want %v", tc.name, tc.peer, tc.ref, got, tc.want)
		}
	}
}

// The I/O around the rules: files read from fixture directories after a
// refusal; anything unproven keeps the refusal; a process that is gone is
// not judged at all.
func TestProveNSFixture(t *testing.T) {
	refusal := &fs.PathError{Op: "stat", Path: "x/ns/user", Err: unix.EACCES}
	ref := NS{User: 11, Mnt: 12, PID: 13}
	const full, mnt = "0 0 4294967295\n", "21 26 0:20 / /proc rw - proc proc rw\n"
	refDir := fixture(t, full, mnt, "NSpid:\t7\n")
	for _, tc := range []struct {
		name                      string
		uidMap, mountinfo, status string
		want                      NS
	}{
		{"same", full, mnt, "NSpid:\t9\n", ref},
		{"another user namespace", "0 1000 1\n", mnt, "NSpid:\t9\n", NS{otherNS, 12, 13}},
		{"another mount namespace", full, "90 80 0:20 / /proc rw - proc proc rw\n", "NSpid:\t9\n", NS{11, otherNS, 13}},
		{"another pid namespace", full, mnt, "NSpid:\t9\t1\n", NS{11, 12, otherNS}},
		{"all other", "", "90 80 0:20 / /proc rw - proc proc rw\n", "NSpid:\t9\t1\n", NS{otherNS, otherNS, otherNS}},
		{"pid unproven", full, mnt, "Pid:\t9\n", NS{}},
		{"user unproven", "0 0\n", mnt, "NSpid:\t9\n", NS{}},
		{"mnt unproven", full, "", "NSpid:\t9\n", NS{}},
	} {
		dir := fixture(t, tc.uidMap, tc.mountinfo, tc.status)
		ns, err := proveNS(dir, refDir, ref, refusal)
		if ns != tc.want || (err != nil) != (tc.want == NS{}) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, ns, err, tc.want)
		}
		if err != nil && !errors.Is(err, unix.EACCES) {
			t.Errorf("%s: the error %v is not the refusal", tc.name, err)
		}
		if got, err := proveNS(dir, refDir, NS{User: 11, Mnt: 12}, refusal); err == nil {
			t.Errorf("%s: against a partly zero reference: %+v", tc.name, got)
		}
	}
	// A reference that cannot be read proves nothing.
	if ns, err := proveNS(fixture(t, full, mnt, "NSpid:\t9\n"), filepath.Join(refDir, "absent"), ref, refusal); err == nil {
		t.Errorf("against an absent reference: %+v", ns)
	}
	// A peer whose directory is gone is gone, not unproven.
	if ns, err := proveNS(filepath.Join(refDir, "absent"), refDir, ref, refusal); !errors.Is(err, ErrGone) {
		t.Errorf("absent peer: %+v, %v; want ErrGone", ns, err)
	}
	if ns, err := ReadNSAgainst(filepath.Join(refDir, "absent"), refDir, ref); !errors.Is(err, ErrGone) {
		t.Errorf("ReadNSAgainst of an absent peer: %+v, %v; want ErrGone", ns, err)
	}
	// Readable namespaces are read, never inferred.
	self, err := ReadNS("/proc/self")
	if err != nil {
		t.Skipf("no procfs: %v", err)
	}
	if ns, err := ReadNSAgainst("/proc/self", refDir, ref); err != nil || ns != self {
		t.Errorf("ReadNSAgainst(/proc/self) = %+v, %v; want %+v", ns, err, self)
	}
}

// fixture writes a fake /proc/PID directory.
func fixture(t *testing.T, uidMap, mountinfo, status string) string {
	t.Helper()
	dir := t.TempDir()
	for name, s := range map[string]string{"uid_map": uidMap, "mountinfo": mountinfo, "status": status} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
