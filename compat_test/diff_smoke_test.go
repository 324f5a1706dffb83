package compat_test

import "testing"

func TestDiffSmoke(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"SET", "k", "v"},
		{"GET", "k"},
		{"GET", "missing"},
		{"SET", "k", "v2", "NX"},
		{"SET", "k", "v3", "XX", "GET"},
		{"DEL", "k", "missing"},
		{"EXISTS", "k"},
		{"NOSUCHCOMMAND", "a", "b"},
		{"GET"},
		{"PING"},
		{"PING", "hello"},
		{"ECHO", "x"},
		{"SELECT", "16"},
		{"SELECT", "x"},
	})
}
