package harness

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/budget"
	"github.com/9harness/9harness/internal/harness/render"
)

// The bounds of an agent's messages (the messages file): the transcript's
// last MessagesSpan bytes are read, at most MessagesMax messages kept, and
// at most MessagesBytes of text given.
const (
	MessagesMax   = 20
	MessagesSpan  = 256 << 10
	MessagesBytes = 64 << 10
	// messageRunes cuts one message's line: a long answer is its start.
	messageRunes = 2000
)

// HasMessages reports whether a has a conversation its harness can render
// (Messages): a session its Spec's Messages reads, or a JSON-lines
// transcript.
func HasMessages(a Agent) bool {
	if s, ok := SpecOf(a.Harness); ok && s.Messages != nil {
		return a.Session != ""
	}
	return jsonLines(a.Transcript)
}

// jsonLines reports whether a transcript's name says it is JSON lines
// (zstd-compressed or not).
func jsonLines(rel string) bool {
	return strings.HasSuffix(rel, ".jsonl") || compressed(rel) && jsonLines(strings.TrimSuffix(strings.TrimSuffix(rel, ".zstd"), ".zst"))
}

// Messages is the last n (at most MessagesMax) messages of a's
// conversation, one line each ("ROLE: text", a tool call as
// "[tool NAME]"), control characters made '?': its Spec's Messages, or
// the generic rendering of a JSON-lines transcript's tail. The bytes read
// are charged to env.Budget while held; a read that does not fit is
// refused with the budget's error. oneLink says the reader is a grantee:
// a transcript with more than one hard link is not read. Nil when there
// is nothing to render.
func Messages(env Env, a Agent, n int, oneLink bool) ([]string, error) {
	n = min(max(n, 0), MessagesMax)
	if n == 0 || !HasMessages(a) {
		return nil, nil
	}
	var out []string
	var err error
	if s, ok := SpecOf(a.Harness); ok && s.Messages != nil {
		out, err = s.Messages(env, a, n)
	} else {
		out, err = transcriptMessages(env, a.Transcript, n, oneLink)
	}
	if err != nil {
		return nil, err
	}
	return boundMessages(out, n), nil
}

// boundMessages keeps the last n lines, each printable and cut to
// messageRunes, within MessagesBytes (the newest kept).
func boundMessages(in []string, n int) []string {
	if len(in) > n {
		in = in[len(in)-n:]
	}
	out := make([]string, 0, len(in))
	total := 0
	for i := len(in) - 1; i >= 0; i-- {
		l := render.Printable(in[i])
		if utf8.RuneCountInString(l) > messageRunes {
			l = string([]rune(l)[:messageRunes])
		}
		if total+len(l)+1 > MessagesBytes {
			break
		}
		total += len(l) + 1
		out = append(out, l)
	}
	slices.Reverse(out)
	return out
}

// compressed reports whether a transcript's name says it is zstd frames
// (Codex's .jsonl.zst, dsh's .jsonl.zstd).
func compressed(rel string) bool {
	return strings.HasSuffix(rel, ".zst") || strings.HasSuffix(rel, ".zstd")
}

// transcriptMessages renders the last MessagesSpan bytes of the JSON-lines
// transcript rel (decoded within the zstd bounds where it is compressed).
// oneLink refuses a file with more than one hard link, checked on the
// descriptor it reads (a grantee's read: such a file may be a link to one
// it may not read).
func transcriptMessages(env Env, rel string, n int, oneLink bool) ([]string, error) {
	if env.Root == nil {
		return nil, nil
	}
	f, err := env.Root.Open(rel)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || oneLink && st.Nlink > 1 {
		return nil, nil
	}
	span := min(st.Size, MessagesSpan)
	if env.Budget != nil {
		if err := env.Budget.Charge(span); err != nil {
			return nil, err
		}
		defer env.Budget.Release(span)
	}
	b := make([]byte, span)
	k, _ := f.ReadAt(b, st.Size-span)
	b, cut := b[:k], st.Size > span
	if !compressed(rel) {
		return render.Messages(b, cut, n), nil
	}
	w, ch := newZWork(env.Budget, nil), &budget.Hold{}
	if env.Budget != nil {
		ch = budget.NewHold(env.Budget)
	}
	defer ch.Release()
	if cut {
		out, _ := ztail(w, ch, b, MessagesSpan)
		return render.Messages(out, true, n), nil
	}
	d := zdecode(w, ch, b, 0, MessagesSpan)
	if d.whole != nil {
		return render.Messages(d.whole, false, n), nil
	}
	return render.Messages(d.tail, true, n), nil
}
