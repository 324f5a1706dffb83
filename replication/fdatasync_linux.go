package replication

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data, and its metadata only as far as reading the data
// back needs it.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
