package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// procStatusKB reads a field in kB (VmRSS, VmHWM) of /proc/<pid>/status.
func procStatusKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("%s: %q", field, l)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// Keyless calls in the keys-before-bodies test: how many at once, and how large.
const (
	keylessCalls     = 16
	keylessCallBytes = 39 << 20 // under the 40 MiB gRPC message limit: gRPC would read it whole
	// keylessGrowthKB bounds how far the tool host's peak RSS may rise while it refuses them:
	// far below one message (39 MiB), so that not even one was read.
	keylessGrowthKB = 24 << 10
)

// TestToolhostChecksTheKeyBeforeReadingTheMessage: the tool host refuses calls without the
// service key from their headers, before gRPC reads their messages: 16 keyless 39 MB unary
// calls at once, and as many streams, are refused with Unauthenticated while the process's peak
// RSS (VmHWM) stays where it was — reading and decoding them first took the tool host from
// 30 MB to gigabytes. Calls with the key still work, big ones included.
func TestToolhostChecksTheKeyBeforeReadingTheMessage(t *testing.T) {
	keyed, p := startToolhost(t)
	keyless := toolhostv1.NewToolHostServiceClient(dialService(t, envOf(p.cmd.Env, "ZEST_TOOLHOST_ADDR"), ""))
	wrong := toolhostv1.NewToolHostServiceClient(dialService(t, envOf(p.cmd.Env, "ZEST_TOOLHOST_ADDR"), "not-the-service-key"))
	pid := p.cmd.Process.Pid
	big := bytes.Repeat([]byte("x"), keylessCallBytes)
	before := procStatusKB(t, pid, "VmHWM")

	var wg sync.WaitGroup
	errs := make(chan error, 2*keylessCalls)
	for i := range keylessCalls {
		c := []toolhostv1.ToolHostServiceClient{keyless, wrong}[i%2]
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := c.Call(t.Context(), &toolhostv1.CallRequest{Id: "any", Method: "tools/call", Params: big})
			errs <- err
		}()
		go func() {
			defer wg.Done()
			st, err := c.CallStream(t.Context(), &toolhostv1.CallStreamRequest{Call: &toolhostv1.CallRequest{Id: "any", Method: "tools/call", Params: big}})
			if err == nil {
				_, err = st.Recv()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if st := status.Convert(err); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), "only Zest's own services") {
			t.Fatalf("a keyless call: %v, want Unauthenticated naming the service key", err)
		}
	}
	after := procStatusKB(t, pid, "VmHWM")
	t.Logf("tool host peak RSS: %d kB before %d keyless %d MiB calls and streams, %d kB after (+%d kB)",
		before, 2*keylessCalls, keylessCallBytes>>20, after, after-before)
	if after-before > keylessGrowthKB {
		t.Fatalf("the tool host's peak RSS grew by %d kB while refusing keyless calls (at most %d kB): their messages were read", after-before, keylessGrowthKB)
	}

	// The key opens the same calls: a server starts and answers, and a big call is read (an
	// unknown server's id is what it fails on, not its key).
	ensure(t, keyed, "echo", "node", filepath.Join(peersDir(t), "echo-server.mjs"))
	args, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]any{"text": "keyed"}})
	if r, err := keyed.Call(t.Context(), &toolhostv1.CallRequest{Id: "echo", Method: "tools/call", Params: args}); err != nil || !strings.Contains(string(r.GetResult()), "keyed") {
		t.Fatalf("a keyed call: %v %v", r, err)
	}
	if _, err := keyed.Call(t.Context(), &toolhostv1.CallRequest{Id: "nope", Method: "tools/call", Params: big}); status.Code(err) != codes.NotFound {
		t.Fatalf("a keyed big call for an unknown server: %v, want NotFound", err)
	}
}
