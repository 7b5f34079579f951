package etcdtest

import (
	"net/http"
	"testing"
	"time"
)

// TestThreeMembersSurviveKillAndRestart: a cluster of three answers, keeps a quorum with one
// member killed, and takes the member back on its data and ports.
func TestThreeMembersSurviveKillAndRestart(t *testing.T) {
	c := Start(t, 3)
	if n := len(c.Endpoints()); n != 3 {
		t.Fatalf("%d endpoints", n)
	}
	client := &http.Client{Timeout: time.Second}
	c.Kill(1)
	if err := health(client, c.ClientURL(1)); err == nil {
		t.Fatal("a killed member still answers")
	}
	for _, i := range []int{0, 2} {
		if err := waitFor(client, c.ClientURL(i)); err != nil {
			t.Fatalf("member %d with one of three killed: %v", i, err)
		}
	}
	start := time.Now()
	c.Restart(1)
	t.Logf("member 1 rejoined in %v", time.Since(start))
	if err := health(client, c.ClientURL(1)); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	for i := range 3 {
		if err := health(client, c.ClientURL(i)); err == nil {
			t.Fatalf("member %d answers after Stop", i)
		}
	}
}

// waitFor polls /health for up to 3 s (a leader may be re-elected meanwhile).
func waitFor(client *http.Client, url string) error {
	var err error
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = health(client, url); err == nil {
			return nil
		}
	}
	return err
}

func TestMissingBinarySkipsOrFails(t *testing.T) {
	t.Setenv(EnvBin, "/nonexistent/etcd")
	if _, err := Bin(); err == nil {
		t.Fatal("Bin accepted a missing binary")
	}
}

// TestLeader: one member of three says it leads; killed, another one leads.
func TestLeader(t *testing.T) {
	c := Start(t, 3)
	first := c.Leader()
	if first < 0 {
		t.Fatal("no member leads")
	}
	c.Kill(first)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l := c.Leader(); l >= 0 && l != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new leader 10 s after member %d was killed", first)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
