// Command etcd is the etcd server, built from the published go.etcd.io/etcd/server/v3
// module at the version Kubernetes itself requires (see ../go.mod).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
