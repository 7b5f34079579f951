package grpcdial

import (
	"encoding/json"
	"strings"
	"testing"

	_ "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	_ "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	_ "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	_ "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

func TestParseTarget(t *testing.T) {
	for _, c := range []struct {
		in      string
		addrs   []string
		dns     bool
		wantErr string
	}{
		{in: "127.0.0.1:13310", addrs: []string{"127.0.0.1:13310"}},
		{in: ":13310", addrs: []string{":13310"}},
		{in: "[::1]:1", addrs: []string{"[::1]:1"}},
		{in: "a:1,b:2", addrs: []string{"a:1", "b:2"}},
		{in: " a:1 , b:2 ", addrs: []string{"a:1", "b:2"}},
		{in: "dns:///inference.zest.svc:13310", dns: true},
		{in: "dns://10.0.0.53:53/inference:13310", dns: true},
		{in: "", wantErr: "address 1 is empty"},
		{in: "a:1,", wantErr: "address 2 is empty"},
		{in: "a:1,a:1", wantErr: `address "a:1" is listed twice`},
		{in: "a", wantErr: `address "a" is not host:port`},
		{in: "a:1,b", wantErr: `address "b" is not host:port`},
		{in: "a:", wantErr: "not host:port"},
		{in: "dns:///inference", wantErr: "the name needs a port"},
		{in: "dns:///:13310", wantErr: "the name needs a port"},
		{in: "dns://inference:13310", wantErr: "has no /name:port"},
		{in: "unix:///tmp/s", wantErr: `scheme "unix" is not supported`},
		{in: "http://a:1", wantErr: `scheme "http" is not supported`},
	} {
		got, err := ParseTarget(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseTarget(%q) = %v, %v; want error %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(got.Addrs, "|") != strings.Join(c.addrs, "|") || (got.DNS != "") != c.dns {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %v (dns %v)", c.in, got, err, c.addrs, c.dns)
		}
	}
}

// TestValidateTargetNamesTheFlagAndTheForms: the error a service prints at startup.
func TestValidateTargetNamesTheFlagAndTheForms(t *testing.T) {
	err := ValidateTarget("inference-addr", "a:1;b:2")
	want := `inference-addr "a:1;b:2": address "a:1;b:2" is not host:port: want host:port, a comma-separated list of host:port (replicas), or dns:///name:port`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got  %v\nwant %s…", err, want)
	}
}

// TestEveryMethodIsClassified: every method of every Zest service is in the policy table
// (retried or not, with a reason), and the table names no method that does not exist.
func TestEveryMethodIsClassified(t *testing.T) {
	exists := map[string]bool{}
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(f.Package()), "zest.") && f.Package() != "grpc.health.v1" {
			return true
		}
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				exists["/"+string(s.FullName())+"/"+string(s.Methods().Get(j).Name())] = true
			}
		}
		return true
	})
	classified := map[string]bool{}
	for _, m := range methods {
		if classified[m.name] {
			t.Errorf("%s is in the table twice", m.name)
		}
		classified[m.name] = true
		if !exists[m.name] && m.name != "/grpc.health.v1.Health/Check" {
			t.Errorf("%s is in the table but no service has it", m.name)
		}
		if m.why == "" {
			t.Errorf("%s: no reason given", m.name)
		}
	}
	for name := range exists {
		if !classified[name] && !strings.HasPrefix(name, "/grpc.health.v1.") {
			t.Errorf("%s is not in policy.go's table: say whether a call of it may be sent twice", name)
		}
	}
	for _, never := range []string{"/zest.mcpgateway.v1.AdminService/CallTool", "/zest.toolhost.v1.ToolHostService/Call",
		"/zest.mcpgateway.v1.McpService/EndSession", "/zest.mcpgateway.v1.HttpService/Exchange", "/zest.mcpgateway.v1.ChatService/Chat", "/zest.inference.v1.InferenceService/Chat"} {
		if Retryable(never) {
			t.Errorf("%s is retried", never)
		}
	}
}

// TestServiceConfig: the service config gRPC parses has round robin, health checking and the
// retry policy on the safe methods only.
func TestServiceConfig(t *testing.T) {
	var sc struct {
		LoadBalancingConfig []map[string]any
		HealthCheckConfig   struct{ ServiceName *string }
		MethodConfig        []struct {
			Name        []struct{ Service, Method string }
			RetryPolicy struct {
				MaxAttempts          int
				InitialBackoff       string
				MaxBackoff           string
				RetryableStatusCodes []string
			}
		}
	}
	if err := json.Unmarshal([]byte(serviceConfig), &sc); err != nil {
		t.Fatal(err)
	}
	if _, ok := sc.LoadBalancingConfig[0]["round_robin"]; !ok || sc.HealthCheckConfig.ServiceName == nil || *sc.HealthCheckConfig.ServiceName != "" {
		t.Fatalf("service config %s", serviceConfig)
	}
	rp := sc.MethodConfig[0].RetryPolicy
	if rp.MaxAttempts != 3 || rp.InitialBackoff != "0.05s" || rp.MaxBackoff != "0.1s" || strings.Join(rp.RetryableStatusCodes, ",") != "UNAVAILABLE" {
		t.Fatalf("retry policy %+v", rp)
	}
	n := 0
	for _, m := range methods {
		if m.retry {
			n++
		}
	}
	if len(sc.MethodConfig) != 1 || len(sc.MethodConfig[0].Name) != n {
		t.Fatalf("%d method configs naming %d methods, want 1 naming %d", len(sc.MethodConfig), len(sc.MethodConfig[0].Name), n)
	}
}
