package serverconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/adminjson"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestParseSandbox(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"absent: the tool host's default", `{"id":"s","command":"x"}`, ``},
		{"true", `{"id":"s","command":"x","sandbox":true}`, `{"enabled":true}`},
		{"false opts out of the default", `{"id":"s","command":"x","sandbox":false}`, `{"enabled":false}`},
		{"an object is enabled unless it says otherwise", `{"id":"s","command":"x","sandbox":{"network":"host","writablePaths":["/var/lib/s"],"memory_bytes":1073741824,"max_pids":64,"cpu_seconds":60,"open_files":256}}`,
			`{"enabled":true,"network":"host","writable_paths":["/var/lib/s"],"memory_bytes":"1073741824","max_pids":64,"cpu_seconds":60,"open_files":256}`},
		{"network proxy with allow_hosts", `{"id":"s","command":"x","sandbox":{"network":"proxy","allowHosts":["api.example.com","*.example.org:8443","203.0.113.7"]}}`,
			`{"enabled":true,"network":"proxy","allow_hosts":["api.example.com","*.example.org:8443","203.0.113.7"]}`},
		{"an object with enabled false", `{"id":"s","command":"x","sandbox":{"enabled":false,"readable_paths":["/srv"]}}`, `{"enabled":false,"readable_paths":["/srv"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parse(tc.body, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if cfg.GetSandbox() != nil {
				b, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(cfg.GetSandbox())
				got = strings.ReplaceAll(string(b), " ", "")
			}
			if got != tc.want {
				t.Fatalf("sandbox = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParseSandboxInvalid(t *testing.T) {
	for _, tc := range []struct{ name, body, msg, field string }{
		{"relative writable path", `{"id":"s","command":"x","sandbox":{"writable_paths":["tmp"]}}`, `sandbox.writable_paths[0] "tmp" is not absolute: give the full path`, "sandbox"},
		{"unclean readable path", `{"id":"s","command":"x","sandbox":{"readable_paths":["/a/../b"]}}`, `sandbox.readable_paths[0] "/a/../b" is not clean`, "sandbox"},
		{"network proxy without allow_hosts", `{"id":"s","command":"x","sandbox":{"network":"proxy"}}`, `sandbox.network "proxy" needs sandbox.allow_hosts`, "sandbox"},
		{"a URL in allow_hosts", `{"id":"s","command":"x","sandbox":{"network":"proxy","allow_hosts":["api.example.com","https://x.example.com/"]}}`, `sandbox.allow_hosts[1] "https://x.example.com/" must be a host with an optional port, not a URL`, "sandbox"},
		{"allow_hosts without proxy", `{"id":"s","command":"x","sandbox":{"network":"host","allow_hosts":["api.example.com"]}}`, `allow_hosts only applies to network "proxy"`, "sandbox"},
		{"unknown network", `{"id":"s","command":"x","sandbox":{"network":"lan"}}`, `sandbox.network "lan": want "none" (default), "host" or "proxy"`, "sandbox"},
		{"memory too small", `{"id":"s","command":"x","sandbox":{"memory_bytes":1000}}`, "sandbox.memory_bytes 1000: want 67108864 (64 MiB) to", "sandbox"},
		{"max_pids too small", `{"id":"s","command":"x","sandbox":{"max_pids":2}}`, "sandbox.max_pids 2: want 8 to 65536", "sandbox"},
		{"on streamable-http", `{"id":"s","transport":"http","url":"https://h/mcp","sandbox":true}`, "sandbox is a stdio field", "sandbox"},
		{"not a boolean or object", `{"id":"s","command":"x","sandbox":"on"}`, `sandbox must be true, false or an object such as {"network":"none"`, ""},
		{"member of the wrong type", `{"id":"s","command":"x","sandbox":{"max_pids":"64"}}`, "sandbox.max_pids must be a number of processes, not a string", ""},
		{"fractional member", `{"id":"s","command":"x","sandbox":{"cpu_seconds":1.5}}`, "sandbox.cpu_seconds 1.5 must be a whole number", ""},
		{"unknown member", `{"id":"s","command":"x","sandbox":{"network":"none","memory":1}}`, `unknown field "memory" in sandbox: its fields are enabled, network`, ""},
		{"both spellings", `{"id":"s","command":"x","sandbox":{"max_pids":8,"maxPids":9}}`, "sandbox.max_pids and sandbox.maxPids are the same field", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.body, nil)
			if (!errors.Is(err, ErrInvalid) && !errors.Is(err, adminjson.ErrServer)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want one containing %q", err, tc.msg)
			}
			if tc.field != "" && Field(err) != tc.field {
				t.Fatalf("Field(%v) = %q, want %q", err, Field(err), tc.field)
			}
		})
	}
}
