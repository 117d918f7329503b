package tree

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Guards rule 2 for opencode: its database holds the account's tokens, so
// /opencode serves only the pre-1.2 JSON sessions and messages (storage/
// session, message, part), never opencode.db (nor -wal, -shm), auth.json,
// the share secrets or the project snapshots, to the owner or a grantee.
func TestOpencodeMirror(t *testing.T) {
	home := t.TempDir()
	for _, f := range []string{
		".opencode/opencode.db", ".opencode/opencode.db-wal", ".opencode/opencode.db-shm",
		".opencode/auth.json", ".opencode/mcp-auth.json", ".opencode/account.json",
		".opencode/log/opencode.log",
		".opencode/snapshot/global/HEAD",
		".opencode/storage/session/global/ses_1.json",
		".opencode/storage/message/ses_1/msg_1.json",
		".opencode/storage/part/msg_1/prt_1.json",
		".opencode/storage/session_share/ses_1.json",
	} {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	owner, grantee := views(home)
	want := []string{
		"/opencode/storage",
		"/opencode/storage/message", "/opencode/storage/message/ses_1", "/opencode/storage/message/ses_1/msg_1.json",
		"/opencode/storage/part", "/opencode/storage/part/msg_1", "/opencode/storage/part/msg_1/prt_1.json",
		"/opencode/storage/session", "/opencode/storage/session/global", "/opencode/storage/session/global/ses_1.json",
	}
	for name, v := range map[string]Dir{"owner": owner, "grantee": grantee} {
		d, err := v.Lookup("opencode")
		if err != nil {
			t.Fatalf("%s: /opencode: %v", name, err)
		}
		var got []string
		walkAll(t, d.(Dir), "/opencode", &got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: /opencode holds\n%q\nwant\n%q", name, got, want)
		}
		for _, p := range []string{"/opencode/opencode.db", "/opencode/opencode.db-wal", "/opencode/auth.json",
			"/opencode/log", "/opencode/snapshot", "/opencode/storage/session_share"} {
			if _, err := lookupPath(v, p); err == nil {
				t.Errorf("%s: %s resolves", name, p)
			}
		}
	}
}
