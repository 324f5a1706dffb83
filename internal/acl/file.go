package acl

import (
	"bytes"
	"fmt"
	"strings"
)

// ParseFile reads an ACL file's text as Redis's ACLLoadFromFile does: a
// user per line, "user <name> <rule> ...", blank lines allowed, rules split
// on single spaces. It returns the users, or the error text Redis answers
// ACL LOAD with (every problem found, then its warning), naming the file
// as filename. Nothing is loaded from a file with any error.
func ParseFile(text []byte, filename string) ([]*User, error) {
	var errs strings.Builder
	var users []*User
	seen := map[string]bool{}
	for i, line := range bytes.Split(text, []byte("\n")) {
		lineno := i + 1
		line = bytes.Trim(line, " \t\r\n")
		if len(line) == 0 {
			continue
		}
		argv := bytes.Split(line, []byte(" "))
		if string(argv[0]) != "user" || len(argv) < 2 {
			fmt.Fprintf(&errs, "%s:%d should start with user keyword followed by the username. ", filename, lineno)
			continue
		}
		name := string(argv[1])
		if hasSpaces(argv[1]) {
			fmt.Fprintf(&errs, "'%s:%d: username '%s' contains invalid characters. ", filename, lineno, name)
			continue
		}
		if seen[name] {
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", name, lineno)
			continue
		}
		seen[name] = true
		ops, open := mergeSelectors(argv[2:])
		if open >= 0 {
			fmt.Fprintf(&errs, "%s:%d: Unmatched parenthesis in selector definition.", filename, lineno)
			continue
		}
		u := newUser(name)
		syntax := false
		for _, op := range ops {
			op = bytes.Trim(op, "\t\r\n")
			err := u.apply(op)
			switch {
			case err == nil:
			case err.why == errUnknown:
				fmt.Fprintf(&errs, "%s:%d: Error in applying operation '%s': %s. ", filename, lineno, op, err.Reason())
			case !syntax:
				fmt.Fprintf(&errs, "%s:%d: %s. ", filename, lineno, err.Reason())
				syntax = true
			}
		}
		u.finish()
		users = append(users, u)
	}
	if errs.Len() > 0 {
		errs.WriteString("WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
		return nil, &MessageError{errs.String()}
	}
	return users, nil
}

// File returns the text ACL SAVE writes: a line for each user, in name
// order, as ACL LIST shows it.
func File(users []*User) []byte {
	var b bytes.Buffer
	for _, u := range users {
		b.WriteString("user " + u.name + " " + u.Describe() + "\n")
	}
	return b.Bytes()
}
