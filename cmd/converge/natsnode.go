package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/natsserver"
)

type natsNodeFlags struct {
	name          string
	store         string
	listen        string
	config        string
	clusterName   string
	clusterListen string
	routes        string
}

// newNATSNodeCmd runs one embedded nats-server node. It is hidden: a
// production cluster runs nats-server itself; this is the same server
// `converge up` embeds, for tests (natscluster) and trying a cluster out
// with nothing but the converge binary.
func newNATSNodeCmd(g *globals) *cobra.Command {
	f := &natsNodeFlags{}
	cmd := &cobra.Command{
		Use:    "nats-node",
		Short:  "Run one embedded NATS JetStream server (optionally a cluster node) until interrupted",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if f.store == "" {
				return usageError{errors.New("nats-node needs --store DIR (JetStream's files)")}
			}
			dir, err := filepath.Abs(f.store)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return fmt.Errorf("--store %s: %w", dir, err)
			}
			o := natsserver.Options{DataDir: dir, Listen: f.listen, Name: f.name, ConfigFile: f.config, Logger: &log}
			switch {
			case f.clusterName != "":
				var routes []string
				for _, r := range strings.Split(f.routes, ",") {
					if r = strings.TrimSpace(r); r != "" {
						routes = append(routes, r)
					}
				}
				o.Cluster = &natsserver.ClusterOptions{Name: f.clusterName, Listen: f.clusterListen, Routes: routes}
			case f.clusterListen != "" || f.routes != "":
				return usageError{errors.New("--cluster-listen and --routes need --cluster-name")}
			}
			s, err := natsserver.Start(o)
			if err != nil {
				return err
			}
			ev := log.Info().Str("name", s.Name()).Str("url", s.ClientURL()).Str("store", dir)
			if o.Cluster != nil {
				ev = ev.Str("cluster", f.clusterName).Str("cluster_listen", f.clusterListen).Strs("routes", o.Cluster.Routes)
			}
			ev.Msg("nats node running")
			<-cmd.Context().Done()
			log.Info().Msg("nats node stopping")
			// Graceful: Raft leaders on this node step down first, so the
			// rest of the cluster does not wait out an election timeout.
			s.Shutdown()
			s.WaitForShutdown()
			log.Info().Msg("nats node stopped")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "server name, unique within the cluster (default \"converge\")")
	fl.StringVar(&f.store, "store", "", "JetStream store directory (required)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:4222", "client listen address host:port (port 0: any free one)")
	fl.StringVar(&f.config, "config", "", "nats-server config file loaded first (accounts, TLS, route auth); the flags override it")
	fl.StringVar(&f.clusterName, "cluster-name", "", "cluster name, the same on every node (empty: standalone)")
	fl.StringVar(&f.clusterListen, "cluster-listen", "", "route listen address host:port (fixed port)")
	fl.StringVar(&f.routes, "routes", "", "comma-separated nats-route://host:port of every node (this one may be included)")
	return cmd
}
