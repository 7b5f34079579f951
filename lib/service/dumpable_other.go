//go:build !linux

package service

// nonDumpable does nothing where there is no PR_SET_DUMPABLE.
func nonDumpable() error { return nil }
