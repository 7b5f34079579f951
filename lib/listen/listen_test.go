package listen

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelperProcess is the child of the tests below: it opens its listener as a service does
// and prints where it listens (or why it could not).
func TestHelperProcess(t *testing.T) {
	if os.Getenv("LISTEN_TEST_CHILD") != "1" {
		t.Skip("only run as a child process")
	}
	lis, err := TCP(os.Getenv("LISTEN_TEST_ADDR"))
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error())
		os.Exit(0)
	}
	os.Stdout.WriteString("listening " + lis.Addr().String() + " fds=" + os.Getenv(EnvFDs))
	os.Exit(0)
}

func child(t *testing.T, addr string, sock *os.File, extraEnv ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "LISTEN_TEST_CHILD=1", "LISTEN_TEST_ADDR="+addr)
	cmd.Env = append(cmd.Env, extraEnv...)
	if sock != nil {
		cmd.ExtraFiles = []*os.File{sock}
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v (%s)", err, out.String())
	}
	return out.String()
}

func reserve(t *testing.T) (string, *os.File) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := l.(*net.TCPListener).File()
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return l.Addr().String(), f
}

func TestHandedOverSocket(t *testing.T) {
	addr, sock := reserve(t)
	// The handed-over socket is used (its port is still taken, so binding anew would fail),
	// and the activation variables are gone from the environment afterwards.
	if got := child(t, addr, sock, EnvFDs+"=1"); got != "listening "+addr+" fds=" {
		t.Fatalf("got %q", got)
	}
	// Another process's LISTEN_PID: the variables are not ours, the address is bound anew.
	if got := child(t, "127.0.0.1:0", sock, EnvFDs+"=1", EnvPID+"=1"); !strings.HasPrefix(got, "listening 127.0.0.1:") || strings.Contains(got, addr) {
		t.Fatalf("got %q", got)
	}
	// A socket on another port than the configured one is refused, naming both.
	other, _ := reserve(t)
	if got := child(t, other, sock, EnvFDs+"=1"); !strings.Contains(got, "listens on "+addr+", not on the configured "+other) {
		t.Fatalf("got %q", got)
	}
	if got := child(t, addr, sock, EnvFDs+"=2"); !strings.Contains(got, "exactly one socket") {
		t.Fatalf("got %q", got)
	}
}

func TestNoHandOverBindsTheAddress(t *testing.T) {
	if got := child(t, "127.0.0.1:0", nil); !strings.HasPrefix(got, "listening 127.0.0.1:") {
		t.Fatalf("got %q", got)
	}
}

func TestIsLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "127.9.9.9:1": true, "[::1]:1": true, "localhost:1": true, "a.localhost:1": true, "LOCALHOST.:1": true,
		"0.0.0.0:1": false, ":1": false, "[::]:1": false, "192.0.2.1:1": false, "example.com:1": false, "127.0.0.1": false,
	} {
		if got := IsLoopbackAddr(addr); got != want {
			t.Errorf("IsLoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}
