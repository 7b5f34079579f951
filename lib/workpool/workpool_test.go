package workpool

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Every function runs exactly once, also when there are more at once than workers.
func TestEveryFunctionRunsOnce(t *testing.T) {
	p := New(4)
	var n atomic.Int64
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 100 {
		wg.Add(1)
		p.Go(func() {
			defer wg.Done()
			<-release // all 100 are in flight at once: 96 ran on their own goroutines
			n.Add(1)
		})
	}
	close(release)
	wg.Wait()
	if n.Load() != 100 {
		t.Fatalf("%d ran, want 100", n.Load())
	}
}
