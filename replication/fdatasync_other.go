//go:build !linux

package replication

import "os"

// fdatasync syncs f: where there is no fdatasync, with its metadata.
func fdatasync(f *os.File) error { return f.Sync() }
