package zestctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/zestmcp/zest/lib/adminjson"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// lemonadeServersFile is the file in which lemond's MCP client host keeps its servers.
const lemonadeServersFile = "mcp_servers.json"

// lemonadeServerFiles are the places lemond keeps mcp_servers.json, the current one first:
// its config directory since Lemonade's PR #3028 ($XDG_CONFIG_HOME/lemonade, else
// ~/.config/lemonade), then the cache directory it used before ($XDG_CACHE_HOME/lemonade,
// else ~/.cache/lemonade).
func lemonadeServerFiles(getenv func(string) string) []string {
	dir := func(xdg, fallback string) string {
		if d := getenv(xdg); d != "" {
			return filepath.Join(d, "lemonade")
		}
		if home := getenv("HOME"); home != "" {
			return filepath.Join(home, fallback, "lemonade")
		}
		return ""
	}
	var out []string
	for _, d := range []string{dir("XDG_CONFIG_HOME", ".config"), dir("XDG_CACHE_HOME", ".cache")} {
		if d != "" {
			out = append(out, filepath.Join(d, lemonadeServersFile))
		}
	}
	return out
}

// findLemonadeServers picks the file to import: the first of files that exists. The others
// that exist are returned as ignored: lemond moves the legacy copy into its config directory
// only when none is there, so a legacy copy beside a current one is stale, and lemond itself
// no longer reads it.
func findLemonadeServers(files []string) (chosen string, ignored []string, err error) {
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return "", nil, err
		}
		if chosen == "" {
			chosen = f
		} else {
			ignored = append(ignored, f)
		}
	}
	if chosen == "" {
		return "", nil, fmt.Errorf("no Lemonade %s in %v: give its path", lemonadeServersFile, files)
	}
	return chosen, ignored, nil
}

// lemonadeServerEntries reads mcp_servers.json ({"version":1,"servers":[…]}, each server as
// lemond's POST /internal/mcp/servers takes it), at most maxInputBytes.
func lemonadeServerEntries(path string) ([]json.RawMessage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxInputBytes {
		return nil, fmt.Errorf("%s is over %d bytes", path, maxInputBytes)
	}
	var doc struct {
		Servers []json.RawMessage `json:"servers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s is not Lemonade's %s ({\"servers\":[…]}): %w", path, lemonadeServersFile, err)
	}
	return doc.Servers, nil
}

// importLemonadeCmd is `zestctl servers import-lemonade [FILE]`: Lemonade's MCP servers,
// each upserted as POST /internal/mcp/servers would (lib/adminjson reads lemond's shape).
func (a *app) importLemonadeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import-lemonade [FILE]",
		Short: "Register the MCP servers of Lemonade's mcp_servers.json (~/.config/lemonade, else the legacy ~/.cache/lemonade)",
		Args:  args(0, "[FILE]"),
		RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, cmd *cobra.Command, argv []string) error {
			var path string
			var ignored []string
			if len(argv) == 1 {
				path = argv[0]
			} else {
				var err error
				if path, ignored, err = findLemonadeServers(lemonadeServerFiles(a.getenv)); err != nil {
					return err
				}
			}
			entries, err := lemonadeServerEntries(path)
			if err != nil {
				return err
			}
			type result struct {
				ID    string `json:"id,omitempty"`
				Error string `json:"error,omitempty"`
			}
			var results []result
			failed := 0
			for i, e := range entries {
				in, mask, err := adminjson.Server(e)
				if err == nil {
					_, err = adm.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: in, UpdateMask: mask})
				}
				if err != nil {
					failed++
					results = append(results, result{ID: in.GetId(), Error: fmt.Sprintf("servers[%d]: %s", i, describe(err))})
					continue
				}
				results = append(results, result{ID: in.GetId()})
			}
			out := map[string]any{"file": path, "ignored": ignored, "servers": results}
			if err := a.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "read %s\n", path)
				for _, f := range ignored {
					fmt.Fprintf(w, "ignored %s (the legacy copy; lemond reads %s)\n", f, path)
				}
				for _, r := range results {
					if r.Error != "" {
						fmt.Fprintf(w, "failed %s\n", r.Error)
					} else {
						fmt.Fprintf(w, "imported %s\n", r.ID)
					}
				}
			}); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d servers of %s were not imported", failed, len(entries), path)
			}
			return nil
		}),
	}
}
