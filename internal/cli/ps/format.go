package ps

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"text/template"
	"time"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// psTemplate parses a --format template. It is run once over an agent
// with every field set, so that a template naming a field --json does not
// have fails here, as a usage error, even when no agent is listed.
func psTemplate(text string) (*template.Template, error) {
	// As docker's --format: \t and \n typed in the shell's quotes are a
	// tab and a newline.
	text = strings.NewReplacer(`\t`, "\t", `\n`, "\n").Replace(text)
	t, err := template.New("format").Option("missingkey=error").Funcs(psFuncs).Parse(text)
	if err != nil {
		return nil, err
	}
	sample := client.Agent{
		Harness: "x", PID: 1, PPID: 1, Started: 1, Cwd: "/", Name: "x", Title: "x",
		Session: "x", Model: "x", Via: "x", Status: "x", Zmx: "x", Tmux: "x", Transcript: "x",
		Agents: []string{"x"},
	}
	fields := psFields(sample)
	fields["host"] = "x"
	if err := t.Execute(io.Discard, fields); err != nil {
		return nil, err
	}
	return t, nil
}

// psFuncs are --format's functions, docker's names for the same jobs.
var psFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"join":  func(s []string, sep string) string { return strings.Join(s, sep) },
	"lower": strings.ToLower,
	"upper": strings.ToUpper,
}

// formatHeader is the header row of --format 'table ...': the template run
// over every field named by its own name in capitals.
func formatHeader(fields map[string]any) map[string]any {
	h := map[string]any{}
	for k, v := range fields {
		switch v := v.(type) {
		case map[string]int64:
			sub := map[string]string{}
			for n := range v {
				sub[n] = strings.ToUpper(n)
			}
			h[k] = sub
		case []string:
			h[k] = []string{strings.ToUpper(k)}
		default:
			h[k] = strings.ToUpper(k)
		}
	}
	return h
}

// tokenNames are the counts a tokens file may give, in its order.
var tokenNames = []string{"context", "input", "output", "cache_read", "cache_write"}

// psFields is an agent for --format: every field --json can show, by its
// JSON name, present even when the daemon does not know it, and made
// printable, since each agent is one line. A template cannot name a key
// with a dot, so state.via is also state_via; tokens holds every count
// (0 when unknown), so that {{.tokens.context}} never fails, and limits
// Codex's two windows, so that {{.limits.primary.used_percent}} never
// does.
func psFields(a client.Agent) map[string]any {
	m := map[string]any{}
	v := reflect.ValueOf(a)
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		switch f := v.Field(i).Interface().(type) {
		case string:
			m[name] = fleet.Printable(f)
		case []string:
			s := make([]string, len(f))
			for j, x := range f {
				s[j] = fleet.Printable(x)
			}
			m[name] = s
		case client.Tokens:
			t := map[string]int64{}
			for _, n := range tokenNames {
				t[n] = f[n]
			}
			m[name] = t
		case client.Limits:
			l := map[string]map[string]any{}
			for n, w := range f {
				l[fleet.Printable(n)] = map[string]any{"used_percent": w.UsedPercent, "window_minutes": w.WindowMinutes, "resets_at": fleet.Printable(w.ResetsAt)}
			}
			for _, n := range []string{"primary", "secondary"} {
				if l[n] == nil {
					l[n] = map[string]any{"used_percent": 0.0, "window_minutes": int64(0), "resets_at": ""}
				}
			}
			m[name] = l
		default:
			m[name] = f
		}
	}
	m["state_via"] = m["state.via"]
	m["started_at"] = ""
	if a.Started > 0 {
		m["started_at"] = time.Unix(a.Started, 0).UTC().Format(time.RFC3339)
	}
	return m
}
