//go:build unix

package lemonade

import "syscall"

// openNoBlock opens a FIFO without waiting for a writer (and a terminal without making it
// the controlling one); reads of a regular file are not changed by it.
const openNoBlock = syscall.O_NONBLOCK | syscall.O_NOCTTY
