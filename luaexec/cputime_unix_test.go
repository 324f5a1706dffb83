//go:build unix

package luaexec

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, user and system: what a
// benchmark reports beside wall time on a machine where other work takes
// turns on the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
