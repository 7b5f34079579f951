package etcdtest

import "syscall"

// sysProcAttr has the kernel kill a member when the test process dies without its cleanups
// (a test binary killed by go test's -timeout, say): no etcd outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
