package memberlink

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// Two members of builds that speak the same link version carry their links
// in it, and each learns the build the other runs.
func TestLinkTellsEachMemberTheOthersBuild(t *testing.T) {
	a, _ := startLink(t, Config{Node: "a", Build: "0.2.0", Secret: []byte(testSecret)}, testCluster1)
	b, _ := startLink(t, Config{Node: "b", Build: "0.2.7-dev", Secret: []byte(testSecret)}, testCluster1)
	c, err := b.Dial(linkAddr(a), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c)
	if got := b.Builds()["a"]; got != "0.2.0" {
		t.Errorf("the dialer learned %q of the acceptor, want 0.2.0", got)
	}
	if got := a.Builds()["b"]; got != "0.2.7-dev" {
		t.Errorf("the acceptor learned %q of the dialer, want 0.2.7-dev", got)
	}
}

// A member of lockserver 0.1 speaks link version 1 alone and refuses a hello
// of any other: a later member dials it again in version 1, and answers its
// hellos in version 1. Each takes the other's build for 0.1.0, which is all
// that version says.
func TestLinkNegotiatesDownToAVersion1Member(t *testing.T) {
	cur, _ := startLink(t, Config{Node: "cur", Build: "0.2.0", Secret: []byte(testSecret)}, testCluster1)
	old, oldLog := startLink(t, Config{Node: "old", Secret: []byte(testSecret), linkVersion: linkV1, onlyVersion: true}, testCluster1)

	c, err := cur.Dial(linkAddr(old), 10*time.Second)
	if err != nil {
		t.Fatalf("a later member could not link to a version 1 member: %v", err)
	}
	echoes(t, c)
	oldLog.waitLog(t, "bad handshake") // the version 2 hello, refused
	if got := cur.Builds()["old"]; got != "0.1.0" {
		t.Errorf("the later member learned %q of the version 1 member, want 0.1.0", got)
	}
	c, err = cur.DialMember(t.Context(), old.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c)

	c, err = old.Dial(linkAddr(cur), 10*time.Second)
	if err != nil {
		t.Fatalf("a version 1 member could not link to a later member: %v", err)
	}
	echoes(t, c)
	if got := cur.Builds()["old"]; got != "0.1.0" {
		t.Errorf("the later member learned %q of the version 1 dialer, want 0.1.0", got)
	}
}

// A member answers a hello of a later link version than its own in its own,
// skipping the extensions it does not know, as a later member expects.
func TestLinkAnswersALaterVersionInItsOwn(t *testing.T) {
	a, _ := startLink(t, Config{Node: "a", Build: "0.2.0"}, testCluster1)
	nc, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	h := hello{version: linkMax + 3, channel: chanMember, cluster: testCluster1, node: "later", build: "9.0.0"}
	dh := withExtension(h.encode(true), h.build, 77, []byte("what version 5 adds"))
	nc.Write(dh)
	peer, ah, err := readHello(nc, false)
	if err != nil {
		t.Fatal(err)
	}
	if peer.version != linkMax || peer.build != "0.2.0" {
		t.Fatalf("the answer: version %d, build %q; want %d and 0.2.0", peer.version, peer.build, linkMax)
	}
	theirs := make([]byte, proofSize)
	if _, err := io.ReadFull(nc, theirs); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(theirs, proof(nil, "acceptor", dh, ah)) {
		t.Fatal("the acceptor's proof does not cover the hello as the later member sent it")
	}
	nc.Write(proof(nil, "dialer", dh, append(ah, theirs...)))
	var v [1]byte
	if _, err := io.ReadFull(nc, v[:]); err != nil || v[0] != linkOK {
		t.Fatalf("verdict %v, %v", v[0], err)
	}
	if got := a.Builds()["later"]; got != "9.0.0" {
		t.Errorf("the acceptor learned %q of the later member, want 9.0.0", got)
	}
}

// withExtension adds an extension to the encoding of a hello of version 2
// or later whose only extension is its build.
func withExtension(hello []byte, build string, tag byte, value []byte) []byte {
	at := len(hello) - (2 + len(build)) - 2 // where the extensions' size is
	ext := append(append([]byte(nil), hello[at+2:]...), tag, byte(len(value)))
	ext = append(ext, value...)
	out := binary.BigEndian.AppendUint16(append([]byte(nil), hello[:at]...), uint16(len(ext)))
	return append(out, ext...)
}
