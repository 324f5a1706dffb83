package buildinfo

import (
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for s, want := range map[string]Release{
		"0.1": {0, 1}, "0.2.0": {0, 2}, "v0.2.7": {0, 2}, "1.12.3-dev": {1, 12}, "v3.4.5-rc.1": {3, 4},
	} {
		if got, err := Parse(s); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "1", "1.2.3.4", "a.b", "-1.2", "1.-2", "1..2", "v", "99999999.1"} {
		if r, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", s, r)
		}
	}
}

func TestLess(t *testing.T) {
	ordered := []Release{{0, 1}, {0, 2}, {0, 10}, {1, 0}, {1, 3}, {2, 0}}
	for i, a := range ordered {
		for j, b := range ordered {
			if got := a.Less(b); got != (i < j) {
				t.Errorf("%v.Less(%v) = %v", a, b, got)
			}
		}
	}
	if (Release{}).String() != "" || (Release{0, 2}).String() != "0.2" {
		t.Error("String")
	}
}

// The build's version is a release's, and this build speaks the previous
// release's cluster version and its own.
func TestVersionAndReleases(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-dev)?$`).MatchString(Version) {
		t.Fatalf("Version %q is not MAJOR.MINOR.PATCH[-dev]", Version)
	}
	rs := Releases()
	if len(rs) == 0 {
		t.Fatal("releases.txt names no release")
	}
	var prev Release
	for _, r := range rs {
		v, err := Parse(r.Version)
		if err != nil || !strings.HasPrefix(r.Version, "v") || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(r.Commit) {
			t.Fatalf("releases.txt: %+v: want vMAJOR.MINOR.PATCH and a full commit hash (%v)", r, err)
		}
		if !prev.Less(v) && prev != v {
			t.Errorf("releases.txt is not oldest first at %s", r.Version)
		}
		prev = v
	}
	if !prev.Less(Current) && prev != Current {
		t.Errorf("this build (%s) is older than the last release, %v", Version, prev)
	}
	if !Oldest.Less(Current) && Oldest != Current {
		t.Errorf("Oldest %v is above this build's %v", Oldest, Current)
	}
	if !strings.HasPrefix(Describe(), "lockserver "+Version) {
		t.Errorf("Describe() = %q", Describe())
	}
}
