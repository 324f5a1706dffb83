//go:build !linux

package storage

import "os"

// fdatasync syncs f: where there is no fdatasync, with its metadata.
func fdatasync(f *os.File) error { return f.Sync() }

// flushRange writes f's data to disk, where there is no sync_file_range: off
// and n, the part written since the last call, are all that has changed.
func flushRange(f *os.File, off, n int64) error { return fdatasync(f) }
