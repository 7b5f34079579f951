package sandboxspec

import (
	"strings"
	"testing"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/protobuf/proto"
)

func TestCheckNamesTheFieldAndTheFix(t *testing.T) {
	for _, c := range []struct {
		sb   *toolhostv1.Sandbox
		want string
	}{
		{&toolhostv1.Sandbox{WritablePaths: []string{"tmp"}}, `sandbox.writable_paths[0] "tmp" is not absolute`},
		{&toolhostv1.Sandbox{ReadablePaths: []string{"/a", "/b/../c"}}, `sandbox.readable_paths[1] "/b/../c" is not clean: write it as "/c"`},
		{&toolhostv1.Sandbox{WritablePaths: []string{"/"}}, `sandbox.writable_paths[0] "/" is the whole file system`},
		{&toolhostv1.Sandbox{Network: proto.String("proxy")}, `sandbox.network "proxy" needs sandbox.allow_hosts: list the hosts`},
		{&toolhostv1.Sandbox{Network: proto.String("proxy"), AllowHosts: []string{"a.example.com", "*.com"}}, `sandbox.allow_hosts[1] "*.com" wildcard "*.com" is too wide`},
		{&toolhostv1.Sandbox{Network: proto.String("proxy"), AllowHosts: []string{"a.example.com:0"}}, `sandbox.allow_hosts[0] "a.example.com:0" port "0": want 1 to 65535`},
		{&toolhostv1.Sandbox{Network: proto.String("lan")}, `sandbox.network "lan": want "none" (default), "host" or "proxy"`},
		{&toolhostv1.Sandbox{AllowHosts: []string{"example.com"}}, `sandbox.allow_hosts is set but network is "none"`},
		{&toolhostv1.Sandbox{MemoryBytes: proto.Int64(1 << 20)}, "sandbox.memory_bytes 1048576: want 67108864 (64 MiB)"},
		{&toolhostv1.Sandbox{MaxPids: proto.Int32(1)}, "sandbox.max_pids 1: want 8 to 65536"},
		{&toolhostv1.Sandbox{CpuSeconds: proto.Int32(0)}, "sandbox.cpu_seconds 0: want 1 to"},
		{&toolhostv1.Sandbox{OpenFiles: proto.Int32(3)}, "sandbox.open_files 3: want 16 to 1048576"},
	} {
		err := Check(c.sb)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%v) = %v, want %q", c.sb, err, c.want)
		}
	}
	if err := Check(&toolhostv1.Sandbox{Enabled: proto.Bool(true), Network: proto.String("host"), WritablePaths: []string{"/var/lib/x"},
		MemoryBytes: proto.Int64(1 << 30), MaxPids: proto.Int32(64), CpuSeconds: proto.Int32(60), OpenFiles: proto.Int32(256)}); err != nil {
		t.Fatalf("a valid sandbox: %v", err)
	}
}
