package daemonflags

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/daemon"
	"github.com/9harness/9harness/internal/harness"
)

// TestParseIdleTimeout: --idle-timeout reaches the Config, 0 as "never"
// (negative there), since the Config's 0 is the default.
func TestParseIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, daemon.DefaultIdleTimeout},
		{[]string{"--idle-timeout", "30s"}, 30 * time.Second},
		{[]string{"--idle-timeout", "0"}, -1},
	} {
		cfg, err := Parse(append(tc.args, "--root", "claude=/nonexistent"), "dev", nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if cfg.IdleTimeout != tc.want {
			t.Errorf("%q: IdleTimeout %v, want %v", tc.args, cfg.IdleTimeout, tc.want)
		}
	}
}

// TestParseMaxBytes: the byte ceilings reach the Config; a --max-bytes
// below the default per-uid ceiling lowers that default with it.
func TestParseMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		bytes, uid int64
	}{
		{nil, daemon.DefaultMaxBytes, daemon.DefaultMaxBytesPerUID},
		{[]string{"--max-bytes", "1G", "--max-bytes-per-uid", "100M"}, 1 << 30, 100 << 20},
		{[]string{"--max-bytes", "32m"}, 32 << 20, 32 << 20},
		{[]string{"--max-bytes", "20971520"}, 20 << 20, 20 << 20},
	} {
		cfg, err := Parse(append(tc.args, "--root", "claude=/nonexistent"), "dev", nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if cfg.MaxBytes != tc.bytes || cfg.MaxBytesPerUID != tc.uid {
			t.Errorf("%q: MaxBytes %d, MaxBytesPerUID %d; want %d, %d", tc.args, cfg.MaxBytes, cfg.MaxBytesPerUID, tc.bytes, tc.uid)
		}
	}
}

// TestParseAnswers: --help and --version are answers for the command
// to print on stdout, before any other flag is checked; a bad flag is a
// UsageError.
func TestParseAnswers(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want error
	}{
		{[]string{"--help"}, ErrHelp},
		{[]string{"-h", "--msize", "1"}, ErrHelp},
		{[]string{"--version"}, ErrVersion},
		{[]string{"--version", "--msize", "1"}, ErrVersion},
	} {
		if _, err := Parse(tc.args, "dev", nil); !errors.Is(err, tc.want) {
			t.Errorf("Parse %q: %v, want %v", tc.args, err, tc.want)
		}
	}
	var ue UsageError
	if _, err := Parse([]string{"--msize", "1"}, "dev", nil); !errors.As(err, &ue) {
		t.Errorf("Parse --msize 1: %v, want a UsageError", err)
	}
}

// TestHelpText: the help names every harness, /active, both dialects,
// and keeps its flag lines in the "  --flag" form.
func TestHelpText(t *testing.T) {
	h := Help()
	for _, w := range []string{"/active/HARNESS/PID/", "9P2000.L", "plain 9P2000", "  --audit WHERE", "  -h, --help"} {
		if !strings.Contains(h, w) {
			t.Errorf("help lacks %q", w)
		}
	}
	for _, n := range harness.Names() {
		if !strings.Contains(h, "/"+n+"/") {
			t.Errorf("help's tree lacks /%s/", n)
		}
	}
	if strings.Contains(h, "%!") {
		t.Errorf("help has a bad verb:\n%s", h)
	}
}

// TestParseConfig: each flag reaches its field of the Config; a root given
// as NAME=PATH,xdev is the PATH, crossing mounts; names of users and
// groups are resolved to numbers.
func TestParseConfig(t *testing.T) {
	var logged []string
	logf := func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }
	cfg, err := Parse([]string{
		"--unix", "/run/x.sock", "--root", "claude=/c,xdev", "--root", "codex=/x",
		"--max-conns", "9", "--msize", "8192", "--allow-uid", "root", "--allow-uid", "1234",
		"--allow-group", "0", "--allow-move", "--polkit", "--audit", "stderr", "--idle-exit", "10m",
		"--proc", "/p", "--proc-helper", "/h.sock", "--host-path", "/hb", "--resume-path", "/rb",
	}, "v1", logf)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Unix != "/run/x.sock" || cfg.FD != -1 || cfg.Name != "" || cfg.MaxConns != 9 || cfg.MaxMsize != 8192 ||
		!cfg.AllowMove || !cfg.Polkit || cfg.Audit != "stderr" || cfg.IdleExit != 10*time.Minute ||
		cfg.ProcRoot != "/p" || cfg.ProcHelper != "/h.sock" || cfg.ServeProcHelper ||
		cfg.HostPath != "/hb" || cfg.ResumePath != "/rb" {
		t.Errorf("Config %+v", *cfg)
	}
	if cfg.Roots["claude"] != "/c" || cfg.Roots["codex"] != "/x" || !cfg.CrossMounts["claude"] || cfg.CrossMounts["codex"] {
		t.Errorf("Roots %v, CrossMounts %v", cfg.Roots, cfg.CrossMounts)
	}
	if len(cfg.Roots) != len(harness.Names()) {
		t.Errorf("Roots %v: want one per harness", cfg.Roots)
	}
	if !slices.Equal(cfg.AllowUIDs, []uint32{0, 1234}) || !slices.Equal(cfg.AllowGroups, []uint32{0}) {
		t.Errorf("AllowUIDs %v, AllowGroups %v", cfg.AllowUIDs, cfg.AllowGroups)
	}
	cfg.Logf("through %s", "logf")
	cfg.Listening("/run/x.sock")
	if len(logged) < 3 || logged[0] != "through logf" || !strings.HasPrefix(logged[1], "9harnessd v1: serving /run/x.sock (moves allowed for uid ") ||
		!strings.Contains(logged[len(logged)-1], "-s /run/x.sock ls /") {
		t.Errorf("logged %q", logged)
	}
	logged = nil
	cfg, err = Parse([]string{"--quiet", "--root", "claude=/c"}, "v1", logf)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listening("/s")
	if len(logged) != 0 {
		t.Errorf("--quiet logged %q", logged)
	}
}
