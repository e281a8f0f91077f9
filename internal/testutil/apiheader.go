package testutil

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ServedAPI is one API as a package registers it: its key and the version range it serves
// (and advertises).
type ServedAPI struct {
	// Key is the Kafka API key.
	Key int16
	// MinVersion and MaxVersion bound the versions served.
	MinVersion, MaxVersion int16
	// AdvertisedFromZero says ApiVersions lists the API from version 0 although versions
	// below MinVersion are refused.
	AdvertisedFromZero bool
}

// apiFileName matches an API file, named by its key: 08_offset_commit.go.
var apiFileName = regexp.MustCompile(`^(\d\d)_[a-z0-9_]+\.go$`)

// apiHeaderLine matches the first line of an API file's header comment:
// "Produce (key 0), versions 3-13, advertised from 0." or "OffsetDelete (key 47), version 0".
var apiHeaderLine = regexp.MustCompile(`^(\w+) \(key (\d+)\), (?:versions (\d+)-(\d+)|version (\d+))(, advertised from 0)?\b`)

// apiHeader is what the header comment of one API file states.
type apiHeader struct {
	file string
	name string
	api  ServedAPI
}

// readAPIHeaders parses the header comment (the comment between the package clause and the
// imports) of every API file in dir. It returns the headers it could parse and, joined, why it
// could not parse the others.
func readAPIHeaders(dir string) ([]apiHeader, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "[0-9][0-9]_*.go"))
	if err != nil {
		return nil, fmt.Errorf("list API files in %s: %w", dir, err)
	}
	var out []apiHeader
	var errs []error
	for _, path := range paths {
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") || !apiFileName.MatchString(name) {
			continue
		}
		h, err := readAPIHeader(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, h)
	}
	return out, errors.Join(errs...)
}

func readAPIHeader(path string) (apiHeader, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.ImportsOnly)
	if err != nil {
		return apiHeader{}, fmt.Errorf("parse %s: %w", path, err)
	}
	var text string
	for _, cg := range f.Comments {
		if cg.Pos() > f.Name.End() {
			text = cg.Text()
			break
		}
	}
	first, _, _ := strings.Cut(text, "\n")
	m := apiHeaderLine.FindStringSubmatch(first)
	if m == nil {
		return apiHeader{}, fmt.Errorf("%s: header comment starts %q; want \"Name (key N), versions A-B.\" or \"Name (key N), version A.\"",
			filepath.Base(path), first)
	}
	num := func(s string) int16 {
		n, _ := strconv.ParseInt(s, 10, 16) // the pattern admits digits only
		return int16(n)
	}
	h := apiHeader{file: filepath.Base(path), name: m[1], api: ServedAPI{Key: num(m[2]), AdvertisedFromZero: m[6] != ""}}
	if m[5] != "" {
		h.api.MinVersion, h.api.MaxVersion = num(m[5]), num(m[5])
	} else {
		h.api.MinVersion, h.api.MaxVersion = num(m[3]), num(m[4])
	}
	return h, nil
}

// CheckAPIHeaders fails t unless the API files in dir (NN_name.go, one per API key NN) and the
// APIs served match one to one: each file's header names its API and key as Kafka does and
// states the version range served, and every served API has its file. It keeps the headers,
// which say what a file implements, from drifting away from what is registered.
func CheckAPIHeaders(t testing.TB, dir string, served []ServedAPI) {
	t.Helper()
	headers, err := readAPIHeaders(dir)
	if err != nil {
		t.Error(err)
	}
	byKey := make(map[int16]ServedAPI, len(served))
	for _, a := range served {
		byKey[a.Key] = a
	}
	seen := make(map[int16]string)
	for _, h := range headers {
		fileKey, _ := strconv.Atoi(apiFileName.FindStringSubmatch(h.file)[1])
		key := h.api.Key
		switch {
		case int(key) != fileKey:
			t.Errorf("%s: header says key %d; the file name says %d", h.file, key, fileKey)
		case !strings.EqualFold(kmsg.NameForKey(key), h.name): // kmsg spells InitProducerId InitProducerID
			t.Errorf("%s: header names %s; key %d is %s", h.file, h.name, key, kmsg.NameForKey(key))
		case seen[key] != "":
			t.Errorf("%s and %s both describe key %d", seen[key], h.file, key)
		}
		seen[key] = h.file
		want, ok := byKey[key]
		if !ok {
			t.Errorf("%s: describes %s (key %d), which is not served", h.file, h.name, key)
			continue
		}
		if h.api != want {
			t.Errorf("%s: header states %s; served %s", h.file, describe(h.api), describe(want))
		}
	}
	for _, a := range served {
		if seen[a.Key] == "" && err == nil {
			t.Errorf("%s (key %d) is served but no %02d_*.go file in %s describes it", kmsg.NameForKey(a.Key), a.Key, a.Key, dir)
		}
	}
}

func describe(a ServedAPI) string {
	s := fmt.Sprintf("versions %d-%d", a.MinVersion, a.MaxVersion)
	if a.AdvertisedFromZero {
		s += ", advertised from 0"
	}
	return s
}
