package harness

import (
	"slices"
	"strings"
	"unicode/utf8"

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
// refused with the budget's error. Nil when there is nothing to render.
func Messages(env Env, a Agent, n int) ([]string, error) {
	n = min(max(n, 0), MessagesMax)
	if n == 0 || !HasMessages(a) {
		return nil, nil
	}
	var out []string
	var err error
	if s, ok := SpecOf(a.Harness); ok && s.Messages != nil {
		out, err = s.Messages(env, a, n)
	} else {
		out, err = transcriptMessages(env, a.Transcript, n)
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
// transcript rel.
func transcriptMessages(env Env, rel string, n int) ([]string, error) {
	if env.Root == nil {
		return nil, nil
	}
	if compressed(rel) {
		head, tail, done, _ := zwindows(newZWork(env.Budget, nil), env.Root, rel, 0, MessagesSpan)
		defer done()
		if tail == nil {
			tail = head
		}
		var b []byte
		for _, l := range tail {
			b = append(append(b, l...), '\n')
		}
		return render.Messages(b, false, n), nil
	}
	if env.Budget != nil {
		if err := env.Budget.Charge(MessagesSpan); err != nil {
			return nil, err
		}
		defer env.Budget.Release(MessagesSpan)
	}
	whole, _, tail := rawWindows(env.Root, rel, 0, MessagesSpan)
	if whole != nil {
		return render.Messages(whole, false, n), nil
	}
	return render.Messages(tail, true, n), nil
}
