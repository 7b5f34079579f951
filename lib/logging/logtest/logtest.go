// Package logtest holds what tests of logging code share.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a log's destination that a test reads while the log is written (from other
// goroutines): an io.Writer whose String is safe at any time.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
