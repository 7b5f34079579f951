//go:build !linux

package etcdtest

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; Stop (a t.Cleanup) ends members.
func sysProcAttr() *syscall.SysProcAttr { return nil }
