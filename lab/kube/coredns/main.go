// The coredns command, exactly as github.com/coredns/coredns's own coredns.go: the default plugin set
// (core/plugin, generated from upstream's plugin.cfg) and coremain.
package main

import (
	_ "github.com/coredns/coredns/core/plugin" // Plug in CoreDNS's default plugins.
	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
