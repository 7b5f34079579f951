//go:build unix

package edge

import "syscall"

// openFileLimit is the process's open-file limit (RLIMIT_NOFILE, which Go raised to its hard
// limit at start); 0 when it cannot be read.
func openFileLimit() int {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil || l.Cur > 1<<30 {
		return 0
	}
	return int(l.Cur)
}
