package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LocalHost is the name of this machine in a fleet's output.
const LocalHost = "-"

// Host is one machine of a fleet: its name as the user wrote it (in the
// hosts file or after --ssh), and how to reach its daemon. SSH is nil for
// this machine.
type Host struct {
	Name string
	SSH  *SSH
}

// HostsFile is the hosts file's path: $XDG_CONFIG_HOME/9harness/hosts,
// or ~/.config/9harness/hosts; "" when neither is known.
func HostsFile() string {
	conf := os.Getenv("XDG_CONFIG_HOME")
	if conf == "" {
		home, _ := os.UserHomeDir()
		if home == "" {
			return ""
		}
		conf = filepath.Join(home, ".config")
	}
	return filepath.Join(conf, "9harness", "hosts")
}

// HostsError is a hosts file line that cannot be read: File:Line names it.
type HostsError struct {
	File string
	Line int
	Err  error
}

func (e *HostsError) Error() string {
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *HostsError) Unwrap() error { return e.Err }

// ReadHosts reads the hosts file at path. A missing file is no hosts and
// no error when missingOK (the default file need not exist; a file named
// on the command line must).
func ReadHosts(path string, missingOK bool) ([]Host, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && missingOK {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	defer f.Close()
	return ParseHosts(f, path)
}

// ParseHosts reads a hosts file: one host a line,
//
//	[user@]host[:port] [socket=PATH] [ssh-cmd=CMD] [ssh-opt=OPTION]... [forward=no]
//
// blank lines and comments (from a word starting with # to the end of the
// line) ignored. A value with blanks is quoted with "..." or '...'
// (ssh-cmd='~/go/bin/9harness relay'). ssh-opt repeats, in order. The
// same name twice, an unknown key, an empty value or a destination
// starting with '-' is an error naming name:line.
func ParseHosts(r io.Reader, name string) ([]Host, error) {
	var hosts []Host
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		words, err := splitHostLine(sc.Text())
		if err == nil && len(words) == 0 {
			continue
		}
		var h Host
		if err == nil {
			h, err = parseHost(words)
		}
		if err == nil && seen[h.Name] > 0 {
			err = fmt.Errorf("host %s is listed twice (first on line %d)", h.Name, seen[h.Name])
		}
		if err != nil {
			return nil, &HostsError{File: name, Line: n, Err: err}
		}
		seen[h.Name] = n
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return hosts, nil
}

// splitHostLine splits a line into words at blanks, honouring quotes,
// and stops at a word that starts with #.
func splitHostLine(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '"' || c == '\'':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			w.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// parseHost reads one line's words: the destination, then key=value.
func parseHost(words []string) (Host, error) {
	name := words[0]
	s, err := ParseDest(name)
	if err != nil {
		return Host{}, err
	}
	for _, w := range words[1:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok || v == "" {
			return Host{}, fmt.Errorf("%q: want socket=PATH, ssh-cmd=CMD, ssh-opt=OPTION or forward=no", w)
		}
		switch k {
		case "socket":
			s.Socket = v
		case "ssh-cmd":
			s.Command = v
		case "ssh-opt":
			s.Options = append(s.Options, v)
		case "forward":
			if v != "yes" && v != "no" {
				return Host{}, fmt.Errorf("forward=%s: want forward=yes or forward=no", v)
			}
			s.NoForward = v == "no"
		default:
			return Host{}, fmt.Errorf("unknown key %q (socket, ssh-cmd, ssh-opt, forward)", k)
		}
	}
	return Host{Name: name, SSH: &s}, nil
}

// ParseDest reads [user@]host[:port] ([v6addr]:port for a port on an IPv6
// address) into an SSH with that destination; a port makes it
// ssh://[user@]host:port, which ssh reads the same way.
func ParseDest(dest string) (SSH, error) {
	if dest == "" || dest == LocalHost {
		return SSH{}, fmt.Errorf("%q is not a host: write [user@]host[:port]", dest)
	}
	if strings.HasPrefix(dest, "-") {
		return SSH{}, fmt.Errorf("%q: a host cannot begin with '-'", dest)
	}
	if strings.HasPrefix(dest, "ssh://") {
		return SSH{Dest: dest}, nil
	}
	user, hostport := "", dest
	if i := strings.LastIndexByte(dest, '@'); i >= 0 {
		user, hostport = dest[:i+1], dest[i+1:]
		if user == "@" || hostport == "" {
			return SSH{}, fmt.Errorf("%q: want [user@]host[:port]", dest)
		}
	}
	host, port := hostport, ""
	switch {
	case strings.HasPrefix(hostport, "["):
		h, p, err := net.SplitHostPort(hostport)
		if err != nil {
			return SSH{}, fmt.Errorf("%q: want [ADDRESS]:PORT", dest)
		}
		host, port = "["+h+"]", p
	case strings.Count(hostport, ":") == 1:
		host, port, _ = strings.Cut(hostport, ":")
	case strings.Count(hostport, ":") > 1:
		// A bare IPv6 address, no port.
		return SSH{Dest: dest}, nil
	}
	if host == "" || strings.ContainsAny(host, " \t/") {
		return SSH{}, fmt.Errorf("%q: want [user@]host[:port]", dest)
	}
	if port == "" {
		return SSH{Dest: dest}, nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return SSH{}, fmt.Errorf("%q: port %q is not a number from 1 to 65535", dest, port)
	}
	return SSH{Dest: "ssh://" + user + host + ":" + port}, nil
}
