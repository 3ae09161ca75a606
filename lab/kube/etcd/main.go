// The etcd command, exactly as go.etcd.io/etcd/server/v3's own main.go: all of etcd is in etcdmain.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
