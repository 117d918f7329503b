package client

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseHostsFile(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "hosts", "good"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseHosts(f, "good")
	if err != nil {
		t.Fatal(err)
	}
	want := []Host{
		{"laptop", &SSH{Dest: "laptop"}},
		{"alice@build1", &SSH{Dest: "alice@build1"}},
		{"build2:2222", &SSH{Dest: "ssh://build2:2222", Socket: "/run/user/1000/9p/harness"}},
		{"bob@[::1]:2200", &SSH{Dest: "ssh://bob@[::1]:2200", Options: []string{"ProxyJump=bastion", "IdentityFile=~/.ssh/work"}}},
		{"box", &SSH{Dest: "box", Command: "~/go/bin/9harness relay"}},
		{"old", &SSH{Dest: "old", NoForward: true}},
	}
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			t.Logf("got %d: %+v %+v", i, got[i], *got[i].SSH)
		}
		t.Fatalf("ParseHosts(good) differs from want")
	}
}

func TestParseHostsErrors(t *testing.T) {
	for _, tc := range []struct {
		file string
		line int
		why  string
	}{
		{"badkey", 2, `unknown key "bogus"`},
		{"twice", 3, "listed twice (first on line 1)"},
		{"quote", 1, "unterminated"},
		{"badforward", 2, "forward=maybe: want forward=yes or forward=no"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", "hosts", tc.file)
			_, err := ReadHosts(path, false)
			var he *HostsError
			if !errors.As(err, &he) || he.Line != tc.line || he.File != path {
				t.Fatalf("ReadHosts(%s) = %v, want a HostsError at line %d", tc.file, err, tc.line)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("%s:%d: ", path, tc.line)) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("error %q does not name %s:%d and say %q", err, path, tc.line, tc.why)
			}
		})
	}
}

func TestReadHostsMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "hosts")
	if h, err := ReadHosts(missing, true); h != nil || err != nil {
		t.Fatalf("missing default file: %v %v, want none and no error", h, err)
	}
	if _, err := ReadHosts(missing, false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing named file: %v, want ErrNotExist", err)
	}
}

func TestParseDest(t *testing.T) {
	for _, tc := range []struct {
		in, dest string
		bad      bool
	}{
		{in: "h", dest: "h"},
		{in: "u@h", dest: "u@h"},
		{in: "u@h:22", dest: "ssh://u@h:22"},
		{in: "h:2222", dest: "ssh://h:2222"},
		{in: "[::1]:22", dest: "ssh://[::1]:22"},
		{in: "::1", dest: "::1"},
		{in: "ssh://u@h:2", dest: "ssh://u@h:2"},
		{in: "h:0", bad: true},
		{in: "h:x", bad: true},
		{in: "h:022", bad: true},
		{in: "-oProxyCommand=x", bad: true},
		{in: "@h", bad: true},
		{in: "u@", bad: true},
		{in: "-", bad: true},
		{in: "", bad: true},
		{in: "a/b", bad: true},
	} {
		s, err := ParseDest(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && s.Dest != tc.dest) {
			t.Errorf("ParseDest(%q) = %q, %v; want %q (bad %v)", tc.in, s.Dest, err, tc.dest, tc.bad)
		}
	}
}

func TestHostsFilePath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/x/conf")
	if got := HostsFile(); got != "/x/conf/9harness/hosts" {
		t.Errorf("HostsFile with XDG_CONFIG_HOME = %q", got)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/x/home")
	if got := HostsFile(); got != "/x/home/.config/9harness/hosts" {
		t.Errorf("HostsFile with HOME = %q", got)
	}
}
