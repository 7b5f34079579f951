// Command zestctl administers a running Zest suite over its typed gRPC contracts: MCP
// servers, tools, presets, chats, sessions, activity, health, and ready client configs.
// Exit codes are documented in docs/operator/zestctl.md and in package zestctl.
package main

import (
	"os"

	"github.com/zestmcp/zest/cli/zestctl"
)

func main() {
	os.Exit(zestctl.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
