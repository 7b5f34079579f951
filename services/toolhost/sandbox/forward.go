package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
)

// ForwardFlag runs the tool host binary as the forwarder inside a sandbox with network
// "proxy" (ForwardMain): started by the inner step before it restricts itself and execs the
// server, it accepts on 127.0.0.1:ProxyPort of the sandbox's network namespace (the listener
// is its fd 3) and relays each connection to the tool host's proxy socket, bound into the
// sandbox. It dies with the sandbox: bwrap's pid namespace ends with the server.
const ForwardFlag = "--zest-proxy-forward"

// ProxyURL is what HTTP_PROXY and HTTPS_PROXY say inside the sandbox.
var ProxyURL = "http://127.0.0.1:" + strconv.Itoa(ProxyPort)

// proxyEnv points the server's HTTP clients to the forwarder (and so to the proxy): curl,
// Python, Go and Node 24+ (NODE_USE_ENV_PROXY) read these.
func proxyEnv(env []string) []string {
	set := map[string]string{
		"HTTP_PROXY": ProxyURL, "HTTPS_PROXY": ProxyURL, "http_proxy": ProxyURL, "https_proxy": ProxyURL,
		"NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1", "NODE_USE_ENV_PROXY": "1",
	}
	var out []string
	for _, kv := range env {
		k, _, _ := cutEq(kv)
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY"} {
		out = append(out, k+"="+set[k])
	}
	return out
}

func cutEq(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// startForwarder listens on 127.0.0.1:ProxyPort and starts the forwarder with the listener.
// The listener's descriptors close on the server's exec (Go opens them close-on-exec).
func startForwarder(p *Plan) error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ProxyPort))
	if err != nil {
		return fmt.Errorf("forwarder listen: %w", err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(p.Exe, ForwardFlag, p.ProxySocket)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	// Not the server's environment (its secrets), and few threads: they count towards the
	// sandbox's RLIMIT_NPROC (max_pids) with the server's.
	cmd.Env = []string{"GOMAXPROCS=1"}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	return nil
}

// ForwardMain is the forwarder (ForwardFlag SOCKET): it relays every connection accepted on fd
// 3 to the unix socket SOCKET. The proxy bounds the connections and idle time.
func ForwardMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage:", ForwardFlag, "SOCKET (listener on fd 3)")
		return 2
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "zest sandbox forwarder:", err)
		return 1
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "zest sandbox forwarder:", err)
			return 1
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("unix", args[0])
			if err != nil {
				fmt.Fprintln(os.Stderr, "zest sandbox forwarder: the tool host's proxy:", err)
				return
			}
			pipe(c, c, up)
		}()
	}
}
