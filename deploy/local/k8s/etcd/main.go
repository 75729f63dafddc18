// Command etcd runs a single-member embedded etcd for local test clusters.
//
// It listens on loopback only and trades durability for speed (UnsafeNoFsync):
// the data directory is throw-away test state.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func mustURL(hostPort string) url.URL {
	u, err := url.Parse("http://" + hostPort)
	if err != nil {
		log.Fatalf("bad address %q: %v", hostPort, err)
	}
	return *u
}

func main() {
	dataDir := flag.String("data-dir", "", "data directory (required)")
	client := flag.String("listen-client", "127.0.0.1:2379", "client host:port")
	peer := flag.String("listen-peer", "127.0.0.1:2380", "peer host:port")
	logLevel := flag.String("log-level", "warn", "zap log level")
	flag.Parse()
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		os.Exit(2)
	}

	cfg := embed.NewConfig()
	cfg.Name = "local"
	cfg.Dir = *dataDir
	c, p := mustURL(*client), mustURL(*peer)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{c}, []url.URL{c}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{p}, []url.URL{p}
	cfg.InitialCluster = cfg.Name + "=" + p.String()
	cfg.LogLevel = *logLevel
	cfg.UnsafeNoFsync = true
	// NewConfig leaves this at 0, which logs every request as "expensive".
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: start: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		log.Fatal("etcd: not ready after 60s")
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		log.Printf("etcd: %v, shutting down", s)
		e.Close()
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	}
}
