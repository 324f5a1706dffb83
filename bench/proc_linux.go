package main

import "syscall"

// childAttr makes a server the bench started die with the bench, so that an
// interrupted run leaves no process behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
