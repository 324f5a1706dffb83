package main

import (
	"flag"
	"log"
	"os"
	"os/signal"

	"github.com/lockserver/lockserver"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "listen address")
	flag.Parse()
	s, err := lockserver.Open(lockserver.Options{Addr: *addr})
	if err != nil {
		log.Fatal(err)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	<-ch
	s.Close()
}
