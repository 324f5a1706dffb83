package luaexec

import (
	"fmt"
	"os"
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

func TestScratch(t *testing.T) {
	store := keyspace.New()
	e := New(store, Options{})
	for _, s := range []string{os.Getenv("S1"), os.Getenv("S2"), os.Getenv("S3")} {
		if s == "" {
			continue
		}
		c := &keyspace.Call{Store: store, Now: 1000, Args: [][]byte{[]byte("EVAL"), []byte(s), []byte("1"), []byte("k1"), []byte("a1"), []byte("a2")}}
		r := e.Exec(c)
		fmt.Printf("%#v\n", r)
	}
}
