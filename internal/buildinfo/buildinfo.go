// Package buildinfo names this build: the release it is, the cluster
// version it speaks, and the releases before it (releases.txt), with which a
// cluster member must interoperate.
//
// A release is vMAJOR.MINOR.PATCH. Formats (log entries, snapshots, the
// member link's messages) change only from one MAJOR.MINOR to the next, so
// a cluster's version is a MAJOR.MINOR: the lowest its voters run. A build
// between two releases carries the next release's version with "-dev".
package buildinfo

import (
	_ "embed"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// Version is the release this build is, or the next one with "-dev".
const Version = "0.2.0-dev"

// Current is this build's MAJOR.MINOR: the highest cluster version it
// speaks.
var Current = MustParse(Version)

// Oldest is the lowest cluster version this build reads and writes: the
// previous release's (N-1). A cluster whose version is lower must be upgraded
// to that release first.
var Oldest = Release{0, 1}

// Release is a MAJOR.MINOR: a cluster version, or the formats a build speaks.
// The zero Release is none known.
type Release struct{ Major, Minor int }

// Parse reads "MAJOR.MINOR", "MAJOR.MINOR.PATCH" or either with a leading v
// and a -suffix, and returns its MAJOR.MINOR.
func Parse(s string) (Release, error) {
	t := strings.TrimPrefix(s, "v")
	t, _, _ = strings.Cut(t, "-")
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Release{}, fmt.Errorf("version %q: want MAJOR.MINOR or MAJOR.MINOR.PATCH", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 1<<16 {
			return Release{}, fmt.Errorf("version %q: want MAJOR.MINOR or MAJOR.MINOR.PATCH", s)
		}
		n[i] = v
	}
	return Release{n[0], n[1]}, nil
}

// MustParse is Parse for versions the program itself names.
func MustParse(s string) Release {
	r, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return r
}

// String is "MAJOR.MINOR", or "" for the zero Release.
func (r Release) String() string {
	if r == (Release{}) {
		return ""
	}
	return fmt.Sprintf("%d.%d", r.Major, r.Minor)
}

// Less reports whether r is older than o.
func (r Release) Less(o Release) bool {
	return r.Major < o.Major || r.Major == o.Major && r.Minor < o.Minor
}

// Describe is the build as `lockserver --version` prints it: the version,
// and the commit and Go it was built from where the toolchain recorded them.
func Describe() string {
	s := "lockserver " + Version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return s
	}
	var rev, modified string
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		s += " (commit " + rev + modified + ")"
	}
	return s + " " + info.GoVersion
}

//go:embed releases.txt
var releases string

// A Published release: its version and the commit it was made from.
type Published struct {
	Version string // vMAJOR.MINOR.PATCH
	Commit  string
}

// Releases returns the published releases, oldest first, from releases.txt.
func Releases() []Published {
	var rs []Published
	for _, line := range strings.Split(releases, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		rs = append(rs, Published{Version: f[0], Commit: f[1]})
	}
	return rs
}
