package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync syncs f's data, and its metadata only as far as reading the data
// back needs it.
func fdatasync(f *os.File) error {
	return retryEINTR(func() error { return unix.Fdatasync(int(f.Fd())) })
}

// flushRange starts writing the n bytes of f at off to disk, and waits for
// the n bytes before them, written out by the call before, to be there: a
// file written in order so never has more than 2n bytes waiting for the
// disk, and the writer waits for the disk only as far as it runs ahead of it.
func flushRange(f *os.File, off, n int64) error {
	fd := int(f.Fd())
	if err := retryEINTR(func() error { return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE) }); err != nil {
		return err
	}
	if off < n {
		return nil
	}
	return retryEINTR(func() error {
		return unix.SyncFileRange(fd, off-n, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	})
}

func retryEINTR(call func() error) error {
	for {
		if err := call(); err != unix.EINTR {
			return err
		}
	}
}
