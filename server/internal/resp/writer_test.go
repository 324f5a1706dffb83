package resp

import (
	"math"
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

// TestAppendReply checks the writer against hand-written RESP2 and RESP3
// renderings of every reply kind (the bytes Redis 7 writes for each).
func TestAppendReply(t *testing.T) {
	push := keyspace.Reply{Kind: keyspace.KindPush, Elems: []keyspace.Reply{keyspace.Bulk("message"), keyspace.Bulk("ch"), keyspace.Bulk("hi")}}
	set := keyspace.Reply{Kind: keyspace.KindSet, Elems: []keyspace.Reply{keyspace.Status("a"), keyspace.Status("b")}}
	cases := []struct {
		name        string
		r           keyspace.Reply
		resp2, rsp3 string
	}{
		{"null", keyspace.Null, "$-1\r\n", "_\r\n"},
		{"zero reply is a null", keyspace.Reply{}, "$-1\r\n", "_\r\n"},
		{"null array", keyspace.NullArray, "*-1\r\n", "_\r\n"},
		{"status", keyspace.OK, "+OK\r\n", "+OK\r\n"},
		{"status with CR LF", keyspace.Status("a\r\nb"), "+a  b\r\n", "+a  b\r\n"},
		{"error", keyspace.Error("ERR bad\nthing"), "-ERR bad thing\r\n", "-ERR bad thing\r\n"},
		{"int", keyspace.Int(-42), ":-42\r\n", ":-42\r\n"},
		{"int min", keyspace.Int(math.MinInt64), ":-9223372036854775808\r\n", ":-9223372036854775808\r\n"},
		{"bulk", keyspace.Bulk("a\r\nb"), "$4\r\na\r\nb\r\n", "$4\r\na\r\nb\r\n"},
		{"empty bulk", keyspace.Bulk(""), "$0\r\n\r\n", "$0\r\n\r\n"},
		{"array", keyspace.Array(keyspace.Bulk("a"), keyspace.Int(1), keyspace.Null, keyspace.Array()),
			"*4\r\n$1\r\na\r\n:1\r\n$-1\r\n*0\r\n", "*4\r\n$1\r\na\r\n:1\r\n_\r\n*0\r\n"},
		{"map", keyspace.Map(keyspace.Bulk("k"), keyspace.Int(1), keyspace.Bulk("m"), keyspace.Array(keyspace.Bulk("x"))),
			"*4\r\n$1\r\nk\r\n:1\r\n$1\r\nm\r\n*1\r\n$1\r\nx\r\n", "%2\r\n$1\r\nk\r\n:1\r\n$1\r\nm\r\n*1\r\n$1\r\nx\r\n"},
		{"empty map", keyspace.Map(), "*0\r\n", "%0\r\n"},
		{"set", set, "*2\r\n+a\r\n+b\r\n", "~2\r\n+a\r\n+b\r\n"},
		{"double", keyspace.Double(1.5), "$3\r\n1.5\r\n", ",1.5\r\n"},
		{"whole double", keyspace.Double(3), "$1\r\n3\r\n", ",3\r\n"},
		{"small double", keyspace.Double(0.1), "$19\r\n0.10000000000000001\r\n", ",0.10000000000000001\r\n"},
		{"inf", keyspace.Double(math.Inf(1)), "$3\r\ninf\r\n", ",inf\r\n"},
		{"-inf", keyspace.Double(math.Inf(-1)), "$4\r\n-inf\r\n", ",-inf\r\n"},
		{"true", keyspace.Reply{Kind: keyspace.KindBool, Int: 1}, ":1\r\n", "#t\r\n"},
		{"false", keyspace.Reply{Kind: keyspace.KindBool}, ":0\r\n", "#f\r\n"},
		{"verbatim", keyspace.Reply{Kind: keyspace.KindVerbatim, Str: "a:1\r\n"}, "$5\r\na:1\r\n\r\n", "=9\r\ntxt:a:1\r\n\r\n"},
		{"push", push, "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n", ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"},
		{"pairs", keyspace.Pairs(keyspace.Bulk("m"), keyspace.Double(2), keyspace.Bulk("n"), keyspace.Double(0.5)),
			"*4\r\n$1\r\nm\r\n$1\r\n2\r\n$1\r\nn\r\n$3\r\n0.5\r\n", "*2\r\n*2\r\n$1\r\nm\r\n,2\r\n*2\r\n$1\r\nn\r\n,0.5\r\n"},
	}
	for _, c := range cases {
		if got := string(AppendReply(nil, c.r, 2)); got != c.resp2 {
			t.Errorf("%s RESP2 = %q, want %q", c.name, got, c.resp2)
		}
		if got := string(AppendReply(nil, c.r, 3)); got != c.rsp3 {
			t.Errorf("%s RESP3 = %q, want %q", c.name, got, c.rsp3)
		}
	}
	// Appending keeps what is already in the buffer.
	if got := string(AppendReply([]byte("+A\r\n"), keyspace.Int(1), 2)); got != "+A\r\n:1\r\n" {
		t.Errorf("append to a buffer = %q", got)
	}
}

func BenchmarkAppendReply(b *testing.B) {
	r := keyspace.Bulk("value-of-some-length")
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendReply(buf[:0], r, 2)
	}
}
