package daemonflags

import (
	"errors"
	"fmt"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/9harness/9harness/internal/tree"
)

// rootFlags collects --root NAME=PATH.
type rootFlags map[string]string

func (r rootFlags) String() string {
	var s []string
	for k, v := range r {
		s = append(s, k+"="+v)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

func (r rootFlags) Type() string { return "NAME=PATH" }

func (r rootFlags) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	path, xdev := strings.CutSuffix(path, ",xdev")
	if !ok || path == "" {
		return fmt.Errorf("want NAME=PATH or NAME=PATH,xdev, got %q", v)
	}
	known := false
	for _, h := range tree.Harnesses {
		known = known || h == name
	}
	if !known {
		return fmt.Errorf("unknown harness %q (known: %s)", name, strings.Join(tree.Harnesses, ", "))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if xdev {
		abs += ",xdev" // split off again in roots
	}
	r[name] = abs
	return nil
}

// byteSize is a flag's number of bytes, with an optional K, M or G suffix
// (powers of 1024, as systemd's MemoryMax= reads them).
type byteSize int64

func (b byteSize) String() string {
	for _, u := range []struct {
		s string
		n int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

func (b *byteSize) Type() string { return "SIZE" }

func (b *byteSize) Set(v string) error {
	mult := int64(1)
	num := strings.TrimRight(v, "KkMmGg")
	switch strings.ToUpper(v[len(num):]) {
	case "":
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	default:
		return errors.New("want a number of bytes, with an optional K, M or G")
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return errors.New("want a positive number of bytes, with an optional K, M or G")
	}
	*b = byteSize(n * mult)
	return nil
}

// idList is the values of --allow-uid or --allow-group, names or numbers,
// resolved after parsing.
type idList []string

func (l idList) resolve(lookup func(string) (string, error)) ([]uint32, error) {
	var out []uint32
	for _, v := range l {
		if n, err := strconv.ParseUint(v, 10, 32); err == nil {
			out = append(out, uint32(n))
			continue
		}
		id, err := lookup(v)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: id %q is not a number", v, id)
		}
		out = append(out, uint32(n))
	}
	return out, nil
}

func lookupUser(name string) (string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return "", err
	}
	return u.Uid, nil
}

func lookupGroup(name string) (string, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", err
	}
	return g.Gid, nil
}
