// Package lockscripts carries the Lua lock scripts lockserver was specified
// with (README.md in this folder lists them with their SHA1s and replies), so
// that the tests, the benchmarks and the bench send exactly the bytes their
// clients send, from the repository alone.
package lockscripts

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

//go:embed *.lua
var files embed.FS

// Names lists the scripts' file names in lexical order.
func Names() []string {
	entries, _ := files.ReadDir(".") // the embedded root always reads
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Source returns the script in the file name without its trailing newline,
// as a client sends it and hashes it for EVALSHA.
func Source(name string) (string, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("lock script: %w", err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// SHA1 is the hex SHA1 of Source(name), the digest a client sends with EVALSHA.
func SHA1(name string) (string, error) {
	src, err := Source(name)
	if err != nil {
		return "", err
	}
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:]), nil
}

// MustSource is Source for tests and benchmarks: an error fails tb.
func MustSource(tb testing.TB, name string) string {
	tb.Helper()
	src, err := Source(name)
	if err != nil {
		tb.Fatal(err)
	}
	return src
}
