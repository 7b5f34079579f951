package e2e

// The npm peers (scripts/peers, `make peers`): MCP servers, clients and conformance suites
// that run on node.

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
)

func serverEverything(t *testing.T) string {
	t.Helper()
	return filepath.Join(peersDir(t), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// peersDir is scripts/peers, whose node_modules hold the npm peers (`make peers`): MCP
// servers, clients and conformance suites, run on node.
func peersDir(t *testing.T) string {
	t.Helper()
	needNode(t)
	return filepath.Dir(testenv.Need(t, testenv.Peers, "it runs the npm MCP peers"))
}

// needNode skips a test that runs node (an MCP server or client written for Node) without it.
func needNode(t *testing.T) {
	t.Helper()
	testenv.Need(t, testenv.Node, "it runs MCP servers or clients on node")
}

// startSupergateway fronts server-everything over Streamable HTTP on a loopback port.
func startSupergateway(t *testing.T) string {
	t.Helper()
	peers := peersDir(t)
	addr := freeAddr(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	cmd := exec.Command("node", "--import", "./loopback.mjs", "node_modules/supergateway/dist/index.js",
		"--stdio", "node node_modules/@modelcontextprotocol/server-everything/dist/index.js",
		"--outputTransport", "streamableHttp", "--port", port, "--stateful", "--sessionTimeout", "60000")
	cmd.Dir = peers
	sock := takeSocket(addr)
	cmd.ExtraFiles = []*os.File{sock}
	cmd.Env = append(os.Environ(), "ZEST_LISTEN_FD=3") // scripts/peers/loopback.mjs listens on it
	p := startProc(t, "supergateway", cmd, true)
	sock.Close()
	t.Cleanup(func() { p.stop(syscall.SIGTERM, 5*time.Second) })
	url := "http://127.0.0.1:" + port + "/mcp"
	waitfor.NoError(t, 15*time.Second, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return url
}

// nodeScript is e2e/testdata/name, an MCP server or client that runs on node with the npm
// peers' SDK.
func nodeScript(t *testing.T, name string) string {
	t.Helper()
	peersDir(t)
	return filepath.Join(repoRoot(), "e2e", "testdata", name)
}
