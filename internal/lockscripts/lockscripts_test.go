package lockscripts

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestSHA1sMatchTheREADME checks the repository's copy of the scripts against
// the table of README.md, the specification's list of what each file's bytes
// hash to: a script edited, dropped or added without its row fails here.
func TestSHA1sMatchTheREADME(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| ([a-z0-9_]+\.lua) \| ([0-9a-f]{40}) \|`).FindAllStringSubmatch(string(readme), -1)
	if len(rows) != 7 {
		t.Fatalf("README.md's table has %d script rows, want the specification's 7", len(rows))
	}
	var listed []string
	for _, row := range rows {
		name, want := row[1], row[2]
		listed = append(listed, name)
		got, err := SHA1(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got != want {
			t.Errorf("%s: SHA1 %s, README.md says %s", name, got, want)
		}
	}
	slices.Sort(listed)
	if names := Names(); !slices.Equal(names, listed) {
		t.Errorf("embedded scripts %q, README.md lists %q", names, listed)
	}
}

func TestSourceOfAMissingScript(t *testing.T) {
	if src, err := Source("missing.lua"); err == nil {
		t.Fatalf("Source(missing.lua) = %q, want an error", src)
	}
}
