package main

import "testing"

func TestTmuxAttach(t *testing.T) {
	for _, tc := range []struct{ current, want string }{
		{"", "tmux attach -t work"},
		{"orig", "tmux attach -t work"},
		{"other:orig", "tmux -L other attach -t work"},
		{"/run/user/1000/tmux/s:orig", "tmux -S /run/user/1000/tmux/s attach -t work"},
		{"a:b:orig", "tmux -L a:b attach -t work"},
	} {
		if got := tmuxAttach(tc.current, "work"); got != tc.want {
			t.Errorf("tmuxAttach(%q) = %q, want %q", tc.current, got, tc.want)
		}
	}
}
