package stdio

import (
	"os/exec"
	"runtime"
	"sync"
)

// Children get a parent-death signal, which Linux ties to the thread that forked them, not to
// the process. Starting every child from one OS thread that never exits makes the signal fire
// only when the tool host itself dies.
var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

func startOnLockedThread(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for f := range spawnCh {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnCh <- func() { errc <- cmd.Start() }
	return <-errc
}
