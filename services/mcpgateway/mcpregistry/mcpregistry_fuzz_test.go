package mcpregistry_test

import (
	"errors"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/mcpregistry"
	"github.com/zestmcp/zest/services/mcpgateway/mcpregistry/mcpregistrytest"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// FuzzParseAndPlan reads any answer as a page and as one server: it never panics, and every
// plan it makes passes serverconfig's checks, or is refused.
func FuzzParseAndPlan(f *testing.F) {
	for _, d := range mcpregistrytest.Documents(f) {
		f.Add([]byte(`{"server":` + string(d) + `}`))
		f.Add([]byte(`{"servers":[{"server":` + string(d) + `}],"metadata":{"nextCursor":"x"}}`))
	}
	f.Add([]byte(`{"server":{"name":"x","packages":[{"registryType":"npm","identifier":"-x","packageArguments":[{"type":"named","value":"{a}{b}"}]}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var entries []mcpregistry.Entry
		if e, err := mcpregistry.ParseEntry(body); err == nil {
			entries = append(entries, e)
		}
		if p, err := mcpregistry.ParsePage(body); err == nil {
			entries = append(entries, p.Servers...)
		}
		for _, e := range entries {
			rs, err := mcpregistry.Plan(e)
			if err != nil {
				if !errors.Is(err, mcpregistry.ErrRefused) || rs.GetPlan() != nil {
					t.Fatalf("Plan failed without a refusal: %v (plan %v)", err, rs.GetPlan())
				}
				continue
			}
			if _, err := serverconfig.Parse(rs.GetPlan().GetConfig(), nil); err != nil {
				t.Fatalf("a plan that Zest refuses: %v", err)
			}
		}
	})
}
