package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// catalogSizes are the numbers of connected servers the catalog scenario measures at.
var catalogSizes = []int{10, 30, 100}

// benchCatalog measures the tool catalog as it grows: 10, 30 and 100 connected stdio servers
// (the bench binary as catalogFixtureRole, 13 tools each), `GET /internal/mcp/tools` through
// the edge, AdminService.ListTools straight to mcpgateway over gRPC, and
// `GET /internal/mcp/servers` (whose states carry the same entries), one request at a time.
func benchCatalog(binDir, _ string, warm, dur time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	const key = "bench-admin-key"
	s, err := startSuite(binDir, append([]string{"LEMONADE_ADMIN_API_KEY=" + key}, strings.Fields(os.Getenv("ZEST_BENCH_ENV"))...)...)
	if err != nil {
		return err
	}
	defer s.stop()
	cc, err := grpcdial.Dial(s.mcpgatewayAddr, key, 0)
	if err != nil {
		return err
	}
	defer cc.Close()
	lc, err := newLoadClientMethod("GET", s.url+"/internal/mcp/tools", http.Header{"Authorization": {"Bearer " + key}}, "")
	if err != nil {
		return err
	}
	defer lc.close()
	servers, err := newLoadClientMethod("GET", s.url+"/internal/mcp/servers", http.Header{"Authorization": {"Bearer " + key}}, "")
	if err != nil {
		return err
	}
	defer servers.close()

	fmt.Println("### catalog: the tool list as connected stdio servers grow")
	fmt.Println()
	fmt.Println("Light Go stdio servers (13 tools of ~800 bytes each, nested schemas with enums, as server-everything's),")
	fmt.Println("registered and connected under distinct ids; then, one request at a time, `GET /internal/mcp/tools`")
	fmt.Println("through the edge and AdminService.ListTools straight to mcpgateway over gRPC (its answer received,")
	fmt.Println("counted and not decoded: the cost of mcpgateway and the hop, not of a client's decoding), and")
	fmt.Println("`GET /internal/mcp/servers`, whose server states carry the same tools. Every answer's tool count is checked.")
	fmt.Println()
	fmt.Println("| servers | tools | GET bytes | GET p50 | GET p99 | GETs | gRPC p50 | gRPC p99 | gRPC bytes | GET /servers p50 | its bytes | RSS edge / mcpgateway / toolhost |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	registered := 0
	for _, n := range catalogSizes {
		for ; registered < n; registered++ {
			id := fmt.Sprintf("cat-%03d", registered+1)
			cfg := fmt.Sprintf(`{"id":%q,"command":%q,"args":[%q]}`, id, self, catalogFixtureRole)
			if _, err := post(s.url+"/internal/mcp/servers", key, cfg); err != nil {
				return fmt.Errorf("register %s: %w", id, err)
			}
			if _, err := post(s.url+"/internal/mcp/servers/"+id+"/connect", key, ""); err != nil {
				return fmt.Errorf("connect %s: %w", id, err)
			}
		}
		var size int
		want := n * len(fixtureTools())
		get := func() error {
			code, b, err := lc.do()
			if err != nil {
				return err
			}
			if code != 200 || bytes.Count(b, []byte(`"chat_name"`)) != want {
				return fmt.Errorf("want %d tools: %w", want, statusError(code, b))
			}
			size = len(b)
			return nil
		}
		var gsize int
		list := func() error {
			var raw rawMessage
			if err := cc.Invoke(context.Background(), mcpgatewayv1.AdminService_ListTools_FullMethodName,
				&mcpgatewayv1.ListToolsRequest{}, &raw, grpc.ForceCodecV2(rawCodec{})); err != nil {
				return err
			}
			if n := countField(raw, 1); n != want {
				return fmt.Errorf("gRPC ListTools: %d tools, want %d", n, want)
			}
			gsize = len(raw)
			return nil
		}
		if err := get(); err != nil { // fail before measuring when the catalog is wrong
			return err
		}
		obs := &cpuObserver{roots: s.pids, profiles: s.profiles, label: fmt.Sprintf("catalog-%d", n), window: dur}
		e := runObserved(1, warm, dur, get, obs)
		obs.report(1, e.calls)
		g := run(1, warm, dur, list)
		var ssize int
		l := run(1, warm, dur, func() error {
			code, b, err := servers.do()
			if err != nil {
				return err
			}
			if code != 200 || bytes.Count(b, []byte(`"chat_name"`)) != want {
				return fmt.Errorf("GET /internal/mcp/servers: want %d tools: %w", want, statusError(code, b))
			}
			ssize = len(b)
			return nil
		})
		if e.errors+g.errors+l.errors > 0 {
			return fmt.Errorf("%d servers: %d failed GETs, %d failed ListTools, %d failed GET /internal/mcp/servers", n, e.errors, g.errors, l.errors)
		}
		ek, _ := rssKB(s.pids["zest-gateway"])
		mk, _ := rssKB(s.pids["zest-mcpgateway"])
		tk, _ := rssKB(s.pids["zest-toolhost"])
		fmt.Printf("| %d | %d | %d KB | %s | %s | %d | %s | %s | %d KB | %s | %d KB | %d / %d / %d MB |\n", n, want, size/1024, ms(e.p50), ms(e.p99), e.calls,
			ms(g.p50), ms(g.p99), gsize/1024, ms(l.p50), ssize/1024, ek/1024, mk/1024, tk/1024)
	}
	fmt.Println()
	return nil
}

// rawMessage is an answer kept as it came, by rawCodec.
type rawMessage []byte

// rawCodec encodes requests as gRPC's proto codec does and keeps answers undecoded.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2(grpcproto.Name).Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawMessage) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return grpcproto.Name }

// countField counts the occurrences of field num at the top level of the encoded message b
// (-1 when b is not a valid encoding).
func countField(b []byte, num protowire.Number) int {
	n := 0
	for len(b) > 0 {
		f, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return -1
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(f, typ, b)
		if l < 0 {
			return -1
		}
		b = b[l:]
		if f == num {
			n++
		}
	}
	return n
}
