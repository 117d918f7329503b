package proc

import (
	"os"
	"path/filepath"
	"testing"
)

// statusFixture reads one of testdata/status, copies of a real status
// file with the no_new_privs and seccomp lines set as the name says.
func statusFixture(t *testing.T, name string) Confinement {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "status", name))
	if err != nil {
		t.Fatal(err)
	}
	c := Confinement{NS: NS{User: 11, Mnt: 12, PID: 13}}
	if err := c.ParseStatus(b); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

// The one judgement of "sandboxed", on fixture status files: the peer's
// against the reference's, the reference's no_new_privs and seccomp
// taken from its parent (the user manager) where it has them itself.
//
// Guards rule 9: never widen: a sandbox gets nothing through 9harness.
func TestRestriction(t *testing.T) {
	for _, tc := range []struct {
		name              string
		peer, ref, parent string // status fixtures
		peerLSM, refLSM   string
		peerNS            NS
		want              Restriction
	}{
		{"the owner's shell, against a daemon started by hand", "plain", "plain", "plain", "", "", NS{}, ""},
		{"setpriv --no-new-privs", "nnp", "plain", "plain", "", "", NS{}, NoNewPrivs},
		{"Landlock (needs no_new_privs)", "nnp", "plain", "plain", "", "", NS{}, NoNewPrivs},
		{"a seccomp filter", "seccomp", "plain", "plain", "", "", NS{}, Seccomp},
		{"strict seccomp", "strict", "plain", "plain", "", "", NS{}, Seccomp},
		// The shipped units: the daemon or helper has no_new_privs and
		// six filters; its parent, the user manager, neither.
		{"the owner's shell, against the units", "plain", "unit", "plain", "", "", NS{}, ""},
		{"no_new_privs, against the units", "nnp", "unit", "plain", "", "", NS{}, NoNewPrivs},
		{"a seccomp filter, against the units", "seccomp", "unit", "plain", "", "", NS{}, Seccomp},
		{"another process of the unit's kind", "unit", "unit", "plain", "", "", NS{}, Seccomp},
		// Everything in a container runs under its one filter: only a
		// filter more is a sandbox.
		{"a container's shell", "container", "container", "container", "", "", NS{}, ""},
		{"a filter more, in a container", "container-seccomp", "container", "container", "", "", NS{}, Seccomp},
		{"no_new_privs, in a container", "container-nnp", "container", "container", "", "", NS{}, NoNewPrivs},
		{"a container without the filter, beside one with", "plain", "container", "container", "", "", NS{}, ""},
		// Before Linux 5.9 filters are not counted: both filtered is not
		// proven the same.
		{"old kernel: filtered against filtered", "old-kernel-seccomp", "old-kernel-seccomp", "old-kernel-seccomp", "", "", NS{}, Seccomp},
		{"old kernel: unfiltered", "old-kernel-plain", "old-kernel-seccomp", "old-kernel-plain", "", "", NS{}, ""},
		{"a kernel without the lines", "no-lines", "no-lines", "no-lines", "", "", NS{}, ""},
		// LSM labels.
		{"an AppArmor profile", "plain", "plain", "plain", "current=firefox (enforce)\n", "current=unconfined\n", NS{}, LSMLabel},
		{"the same label", "plain", "plain", "plain", "current=unconfined\n", "current=unconfined\n", NS{}, ""},
		{"a label where the reference has none", "plain", "plain", "plain", "current=x\n", "", NS{}, LSMLabel},
		// Namespaces come first, and an unread one is unknown.
		{"another user namespace", "plain", "plain", "plain", "", "", NS{User: 99, Mnt: 12, PID: 13}, UserNS},
		{"another mount namespace", "nnp", "plain", "plain", "", "", NS{User: 11, Mnt: 99, PID: 13}, MntNS},
		{"another pid namespace", "plain", "plain", "plain", "", "", NS{User: 11, Mnt: 12, PID: 99}, PIDNS},
		{"namespaces unread", "plain", "plain", "plain", "", "", NS{User: 11}, Unknown},
	} {
		peer, self, parent := statusFixture(t, tc.peer), statusFixture(t, tc.ref), statusFixture(t, tc.parent)
		peer.LSM, self.LSM = tc.peerLSM, tc.refLSM
		if tc.peerNS != (NS{}) {
			peer.NS = tc.peerNS
		}
		ref := Baseline(self, parent)
		if got := peer.Restriction(ref); got != tc.want {
			t.Errorf("%s: %q, want %q (peer %+v, reference %+v)", tc.name, got, tc.want, peer, ref)
		}
		if got := Judge(peer, os.ErrPermission, ref); got != Unknown {
			t.Errorf("%s: judged with an error: %q", tc.name, got)
		}
		if got := peer.Restriction(Confinement{}); got != Unknown {
			t.Errorf("%s: against an unread reference: %q", tc.name, got)
		}
	}
}

// A status file whose lines are not what the kernel prints is an error,
// never a process without restrictions.
func TestParseStatusMalformed(t *testing.T) {
	for _, s := range []string{
		"NoNewPrivs:\t2\n", "NoNewPrivs:\tyes\n", "Seccomp:\t3\n", "Seccomp:\t-1\n",
		"Seccomp_filters:\tx\n", "Seccomp_filters:\t99999999999\n",
	} {
		var c Confinement
		if err := c.ParseStatus([]byte(s)); err == nil {
			t.Errorf("%q: parsed as %+v", s, c)
		}
	}
}

// The labels are read from each attr file an LSM answers, on a fixture
// /proc/PID directory; the live one of this process reads whole.
func TestReadLimitsFixture(t *testing.T) {
	dir := t.TempDir()
	st, err := os.ReadFile(filepath.Join("testdata", "status", "seccomp"))
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "status"), st, 0o444))
	must(os.MkdirAll(filepath.Join(dir, "attr", "apparmor"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "attr", "current"), []byte("snap.x.y (enforce)\n"), 0o444))
	must(os.WriteFile(filepath.Join(dir, "attr", "apparmor", "current"), []byte("snap.x.y (enforce)\n"), 0o444))
	must(os.MkdirAll(filepath.Join(dir, "attr", "selinux"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "attr", "selinux", "current"), []byte("\x00"), 0o444))
	var c Confinement
	if err := ReadLimits(dir, &c); err != nil {
		t.Fatal(err)
	}
	want := Confinement{NoNewPrivs: true, Seccomp: 2, SeccompFilters: 1, LSM: "current=snap.x.y (enforce)\napparmor/current=snap.x.y (enforce)\n"}
	if c != want {
		t.Errorf("ReadLimits = %+v, want %+v", c, want)
	}
	if err := ReadLimits(filepath.Join(dir, "absent"), &c); err == nil {
		t.Error("ReadLimits of an absent process")
	}

	self, err := ReadConfinement("/proc/self")
	if err != nil {
		t.Skipf("no procfs: %v", err)
	}
	if ns, _ := ReadNS("/proc/self"); self.NS != ns || self.SeccompFilters < 0 && self.Seccomp != 0 {
		t.Errorf("ReadConfinement(/proc/self) = %+v", self)
	}
	if ref, err := ReadReference(); err != nil || ref.Restriction(ref) != "" || self.Restriction(ref) != "" {
		t.Errorf("ReadReference = %+v, %v: this process is restricted against its own reference", ref, err)
	}
}
