// Command pause holds a pod's namespaces open until it is told to stop: it waits for SIGTERM or
// SIGINT and exits 0, which is what the kubelet's sandbox container does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
