package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
)

// relayState reports whether the Watch stream of the tool host at addr is open here, whether
// an answer waits for it, and how far it has passed on server id's notifications.
func relayState(m *Manager, addr, id string) (open, waiting bool, seq uint64) {
	m.relayed.mu.Lock()
	defer m.relayed.mu.Unlock()
	hr := m.relayed.hosts[addr]
	if hr == nil {
		return false, false, 0
	}
	return true, hr.wake != nil, hr.seq[id]
}

// A stdio server's answer for a caller that relays its notifications to the same client
// (Hooks.Ordered) waits until this replica's Watch relay has passed on every notification
// the server wrote before it (the answer's notification_seq): here the tool host's Watch
// stream holds the last one back until the answer waits, and the answer comes only after it.
// A caller that did not ask (the chat loop) is not held up by the stream behind.
func TestOrderedAnswerFollowsItsNotifications(t *testing.T) {
	f, th := newFakeHost(t)
	m := New(th, nil, nil)
	var mu sync.Mutex
	var relayed []string
	m.OnNotification(func(id string, msg []byte) {
		mu.Lock()
		defer mu.Unlock()
		relayed = append(relayed, id+" "+string(msg))
	})
	notes := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), relayed...)
	}
	ctx, cancel := context.WithCancel(t.Context())
	followed := make(chan struct{})
	go func() { m.FollowToolHost(ctx); close(followed) }()
	t.Cleanup(func() { cancel(); <-followed })

	cfg := stdioConfig("fx")
	f.setTools("fx", tools("logged"))
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	// The stream opens with what came before it: two notifications of fx.
	f.events <- &toolhostv1.WatchResponse{Id: "fx", Kind: &toolhostv1.WatchResponse_Published{Published: 2}}
	waitfor.True(t, 5*time.Second, "the Watch stream open, at fx's notification 2", func() bool {
		open, _, seq := relayState(m, "fixed", "fx")
		return open && seq == 2
	})
	f.mu.Lock()
	f.noteSeq = 3 // the answer follows a third notification, which the stream holds back
	f.mu.Unlock()
	params := json.RawMessage(`{"name":"logged"}`)

	res, err := m.DispatchToolCall(t.Context(), cfg, params, 0, Hooks{})
	if err != nil || string(res) != `{"content":[{"type":"text","text":"logged"}]}` {
		t.Fatalf("a call without Ordered: %s, %v", res, err)
	}
	if got := notes(); len(got) != 0 {
		t.Fatalf("notifications relayed before the stream sent any: %v", got)
	}

	type answer struct {
		res   json.RawMessage
		err   error
		notes []string
	}
	done := make(chan answer, 1)
	go func() {
		res, err := m.DispatchToolCall(t.Context(), cfg, params, 0, Hooks{Ordered: true})
		done <- answer{res, err, notes()}
	}()
	var early *answer
	waitfor.True(t, 5*time.Second, "the ordered answer waiting for notification 3", func() bool {
		select {
		case a := <-done:
			early = &a
			return true
		default:
		}
		_, waiting, _ := relayState(m, "fixed", "fx")
		return waiting
	})
	if early != nil {
		t.Fatalf("the answer came before the notification the server wrote before it was relayed (%v; relayed: %v)", early.err, early.notes)
	}
	const log = `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"third"}}`
	f.events <- &toolhostv1.WatchResponse{Id: "fx", Seq: 3, Kind: &toolhostv1.WatchResponse_Notification{Notification: []byte(log)}}
	var a answer
	select {
	case a = <-done:
	case <-time.After(NotificationWait / 2): // NotificationWait would end it anyway
		t.Fatal("the answer did not follow its notification")
	}
	if a.err != nil || string(a.res) != string(res) || len(a.notes) != 1 || a.notes[0] != "fx "+log {
		t.Fatalf("answer %s, %v; relayed before it: %v", a.res, a.err, a.notes)
	}
}

// The wait of an ordered answer (relayed.wait) ends as soon as its notifications were passed
// on, and is bounded: by NotificationWait when the stream never gets there, at once when the
// tool host's Watch stream is not open or ends, and by the caller's context.
func TestOrderedWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r relayed
		start := time.Now()
		waited := func(ctx context.Context, seq uint64) <-chan bool {
			got := make(chan bool, 1)
			go func() { got <- r.wait(ctx, "th", "fx", seq, NotificationWait) }()
			synctest.Wait()
			return got
		}
		blocked := func(got <-chan bool, what string) {
			t.Helper()
			select {
			case ok := <-got:
				t.Fatalf("%s: the wait ended (%v)", what, ok)
			default:
			}
		}

		if ok := <-waited(t.Context(), 1); ok || time.Since(start) != 0 {
			t.Fatalf("no Watch stream: %v after %v, want false at once", ok, time.Since(start))
		}
		hr := r.open("th")
		r.passed(hr, "fx", 2) // the stream's published count
		if ok := <-waited(t.Context(), 2); !ok || time.Since(start) != 0 {
			t.Fatalf("passed on already: %v after %v, want true at once", ok, time.Since(start))
		}

		got := waited(t.Context(), 3)
		blocked(got, "notification 3 not passed on")
		r.passed(hr, "other", 7) // another server's
		r.passed(hr, "fx", 1)    // an older number
		synctest.Wait()
		blocked(got, "other notifications passed on")
		r.passed(hr, "fx", 3)
		if ok := <-got; !ok || time.Since(start) != 0 {
			t.Fatalf("notification 3 passed on: %v after %v, want true at once", ok, time.Since(start))
		}

		if ok := <-waited(t.Context(), 4); ok || time.Since(start) != NotificationWait {
			t.Fatalf("notification 4 never passed on: %v after %v, want false after NotificationWait (%v)", ok, time.Since(start), NotificationWait)
		}

		start = time.Now()
		got = waited(t.Context(), 5)
		r.close("th", hr)
		if ok := <-got; ok || time.Since(start) != 0 {
			t.Fatalf("the stream ended: %v after %v, want false at once", ok, time.Since(start))
		}

		hr = r.open("th") // a new stream replaces the one waited on
		got = waited(t.Context(), 5)
		r.open("th")
		if ok := <-got; ok || time.Since(start) != 0 {
			t.Fatalf("another stream opened: %v after %v, want false at once", ok, time.Since(start))
		}
		r.close("th", hr) // an older stream's end leaves the newer one open
		if _, ok := r.hosts["th"]; !ok {
			t.Fatal("the end of a replaced stream closed the one that replaced it")
		}

		ctx, cancel := context.WithCancel(t.Context())
		got = waited(ctx, 6)
		cancel()
		if ok := <-got; ok || time.Since(start) != 0 {
			t.Fatalf("the caller left: %v after %v, want false at once", ok, time.Since(start))
		}
	})
}

// An HTTP server's notifications on a call's own response stream need no waiting: mcp-go's
// transport reads that stream in order and hands each notification to OnNotification (which
// passes it to the GET streams) before it reads the answer, so every log message the server
// wrote before its answer has been relayed when the call returns.
func TestHTTPNotificationsOnTheCallsStreamComeFirst(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{Log: true})
	m := New(nil, nil, nil)
	t.Cleanup(func() { m.Close(context.Background()) })
	var mu sync.Mutex
	var relayed []string
	m.OnNotification(func(id string, msg []byte) {
		mu.Lock()
		defer mu.Unlock()
		relayed = append(relayed, string(msg))
	})
	cfg := httpConfig("up", u.URL)
	for _, hooks := range []Hooks{{}, {Ordered: true}} {
		mu.Lock()
		relayed = nil
		mu.Unlock()
		res, err := m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"log","arguments":{"n":3}}`), 0, hooks)
		mu.Lock()
		got := relayed
		mu.Unlock()
		if err != nil || !strings.Contains(string(res), "logged 3") {
			t.Fatalf("call: %s, %v", res, err)
		}
		if len(got) != 3 || !strings.Contains(got[2], "log 3 of 3") {
			t.Fatalf("ordered %v: relayed before the answer came back: %q, want the 3 log messages", hooks.Ordered, got)
		}
	}
	noViolations(t, u)
}
