package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// benchAudit measures what the audit trail costs a tool call: admin tool calls (`echo` on
// server-everything through edge → mcpgateway → tool host → child) with the trail off
// (ZEST_AUDIT_MAX_ENTRIES=0), on (the default) and on with details (ZEST_AUDIT_DETAILS), on
// bbolt and on etcd (3 members), at concurrency 8 and 64. After each point it reads how many
// entries the trail holds and how many this replica dropped or failed to write.
func benchAudit(binDir, peers string, warm, dur time.Duration) error {
	const key = "bench-admin-key"
	entry, _ := filepath.Abs(filepath.Join(peers, "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	fmt.Println("### audit: admin tool calls with the audit trail off, on, and on with details")
	fmt.Println()
	fmt.Println("`POST /internal/mcp/servers/everything/tools/call` (`echo`) through 1 of each service; every")
	fmt.Println("call is an audit entry, appended in batches (≤ 100 entries or 100 ms a registry write).")
	fmt.Println()
	fmt.Println("| registry | audit | concurrency | calls/s | p50 | p99 | errors | entries kept / dropped / failed |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	defer os.Unsetenv("ZEST_AUDIT_MAX_ENTRIES")
	defer os.Unsetenv("ZEST_AUDIT_DETAILS")
	for _, reg := range []struct {
		label string
		etcd  bool
	}{{"bbolt", false}, {"etcd ×3", true}} {
		for _, mode := range []struct{ label, max, details string }{{"off", "0", "false"}, {"on", "100000", "false"}, {"on + details", "100000", "true"}} {
			os.Setenv("ZEST_AUDIT_MAX_ENTRIES", mode.max)
			os.Setenv("ZEST_AUDIT_DETAILS", mode.details)
			top, err := startTopology(binDir, 1, reg.etcd, key)
			if err != nil {
				return fmt.Errorf("%s, audit %s: %w", reg.label, mode.label, err)
			}
			err = auditRows(top, reg.label, mode.label, entry, key, warm, dur)
			top.stop()
			if err != nil {
				return fmt.Errorf("%s, audit %s: %w", reg.label, mode.label, err)
			}
		}
	}
	fmt.Println()
	return nil
}

func auditRows(top *topology, reg, mode, entry, key string, warm, dur time.Duration) error {
	u := top.edges[0]
	if _, err := post(u+"/internal/mcp/servers", key, fmt.Sprintf(`{"id":"everything","command":"node","args":[%q]}`, entry)); err != nil {
		return fmt.Errorf("upsert: %w", err)
	}
	if _, err := post(u+"/internal/mcp/servers/everything/connect", key, ""); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	auth := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}}
	for _, conc := range []int{8, 64} {
		lc, err := newLoadClient(u+"/internal/mcp/servers/everything/tools/call", auth, `{"name":"echo","arguments":{"message":"bench"}}`)
		if err != nil {
			return err
		}
		r := run(conc, warm, dur, func() error {
			code, b, err := lc.do()
			if err != nil {
				return err
			}
			if code != 200 || !bytes.Contains(b, []byte(`"text":"Echo: bench"`)) {
				return statusError(code, b)
			}
			return nil
		})
		lc.close()
		fmt.Printf("| %s | %s | %d | %.0f | %s | %s | %d | %s |\n", reg, mode, conc, r.rate(), ms(r.p50), ms(r.p99), r.errors, auditCounts(u, key))
	}
	return nil
}

// auditCounts is "kept / dropped / failed" of the trail once its queue is written (the
// export's line count; "-" with the trail off).
func auditCounts(url, key string) string {
	time.Sleep(300 * time.Millisecond) // the last batch
	get := func(path string) ([]byte, int, error) {
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return b, resp.StatusCode, err
	}
	b, code, err := get("/internal/mcp/audit?limit=1")
	if err != nil || code != 200 {
		return "-"
	}
	var page struct{ Dropped, Failed string }
	_ = json.Unmarshal(b, &page)
	all, code, err := get("/internal/mcp/audit/export?kind=tool")
	if err != nil || code != 200 {
		return "?"
	}
	return fmt.Sprintf("%d / %s / %s", bytes.Count(all, []byte("\n")), page.Dropped, page.Failed)
}
