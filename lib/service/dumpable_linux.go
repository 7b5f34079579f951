package service

import "syscall"

// nonDumpable makes this process non-dumpable (PR_SET_DUMPABLE 0): its /proc entries (environ
// with its keys, mem, maps, fd/) then open to no other process of its user — a tool server the
// tool host runs as that same user, for one — only to root with CAP_SYS_PTRACE, and no core
// dump holds its keys.
func nonDumpable() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
