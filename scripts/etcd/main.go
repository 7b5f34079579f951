// Command etcd is etcd's server, built from its pinned module (go.mod) without a download of a
// release binary: `make etcd` builds it into .bin/etcd for the tests that run a real cluster
// (lib/etcdtest). `go install go.etcd.io/etcd/server/v3@…` refuses (etcd's go.mod has replace
// directives); a module of our own that requires it builds. Apart from the product's module:
// etcd's server stays out of its module graph (deploy's TestProductModuleGraph).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
