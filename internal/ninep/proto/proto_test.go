package proto

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestVersionRoundTrip(t *testing.T) {
	for _, v := range []Version{
		{Tag: NoTag, Msize: 8192, Version: Version2000},
		{Tag: 7, Msize: 1 << 20, Version: "9P2000.L.Google.7"},
		{Tag: 0, Msize: 0, Version: ""},
	} {
		for _, typ := range []uint8{Tversion, Rversion} {
			f := AppendVersion(nil, typ, v)
			if len(f) != VersionFixedSize+len(v.Version) || Uint32(f) != uint32(len(f)) {
				t.Errorf("%+v: frame %x has the wrong size", v, f)
			}
			got, err := ParseVersion(f, typ)
			if err != nil || got != v {
				t.Errorf("%+v as type %d: parsed %+v, %v", v, typ, got, err)
			}
		}
	}
}

func TestParseVersionRefuses(t *testing.T) {
	good := AppendVersion(nil, Tversion, Version{Tag: NoTag, Msize: 8192, Version: "9P2000"})
	long := append(bytes.Clone(good), 'x')
	PutUint32(long, uint32(len(long)))
	short := bytes.Clone(good)
	PutUint16(short[11:], 7) // the string's length says more than there is
	lies := bytes.Clone(good)
	PutUint32(lies, uint32(len(lies)+1))
	for name, f := range map[string][]byte{
		"empty":           nil,
		"header only":     good[:HeaderSize],
		"other type":      AppendVersion(nil, Rversion, Version{Version: "9P2000"}),
		"trailing byte":   long,
		"string overruns": short,
		"size field lies": lies,
	} {
		if _, err := ParseVersion(f, Tversion); !errors.Is(err, ErrVersion) {
			t.Errorf("%s: %v, want ErrVersion", name, err)
		}
	}
}

func TestReadFrame(t *testing.T) {
	whole := AppendHeader(nil, 9, Tclunk, 3)
	whole = append(whole, 1, 2)
	for _, c := range []struct {
		name string
		in   []byte
		max  uint32
		want []byte
		err  error
	}{
		{"whole", whole, 64, whole, nil},
		{"at max", whole, 9, whole, nil},
		{"over max", whole, 8, nil, ErrFrame},
		{"below a header", []byte{6, 0, 0, 0, 0, 0}, 64, nil, ErrFrame},
		{"nothing", nil, 64, nil, io.EOF},
		{"cut in the header", whole[:2], 64, nil, io.ErrUnexpectedEOF},
		{"cut in the body", whole[:8], 64, nil, io.ErrUnexpectedEOF},
		{"header then nothing", whole[:4], 64, nil, io.ErrUnexpectedEOF},
	} {
		got, err := ReadFrame(bytes.NewReader(c.in), c.max)
		if !bytes.Equal(got, c.want) || !errors.Is(err, c.err) {
			t.Errorf("%s: %x, %v; want %x, %v", c.name, got, err, c.want, c.err)
		}
	}
}

func TestPick(t *testing.T) {
	for v, want := range map[string]Dialect{
		"9P2000.L":          Dialect2000L,
		"9P2000.L.Google.7": Dialect2000L,
		"9P2000":            Dialect2000,
		"9P2000.u":          Dialect2000,
		"9P2000.X":          DialectNone,
		"9P2000 ":           DialectNone,
		"9P1":               DialectNone,
		"":                  DialectNone,
	} {
		if got := Pick(v); got != want {
			t.Errorf("Pick(%q) = %d, want %d", v, got, want)
		}
	}
}
