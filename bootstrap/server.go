package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ServerConfig configures an embedded etcd server. The zero value serves on
// free loopback ports from a temporary data directory.
type ServerConfig struct {
	// ClientAddr is the host:port clients connect to. Empty means
	// "127.0.0.1:0": loopback, a free port. Node 0 of a multi-node job sets
	// it to an address the other nodes can reach.
	ClientAddr string
	// PeerAddr is the raft peer address. Empty means "127.0.0.1:0"; a single
	// node never receives peer traffic, the address only has to be valid.
	PeerAddr string
	// DataDir holds etcd's data. Empty means a fresh temporary directory,
	// removed by Close; a given directory is left in place.
	DataDir string
	// TLS, if set, serves clients over TLS with CertFile/KeyFile; a CAFile
	// makes the server require client certificates signed by it.
	TLS *TLSFiles
	// Logger receives the server's own messages; nil means slog.Default().
	Logger *slog.Logger
}

// Server is a running embedded etcd server.
type Server struct {
	etcd      *embed.Etcd
	endpoints []string
	tempDir   string // removed by Close; empty when the caller owns DataDir
	log       *slog.Logger

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// StartServer starts a single-node etcd and returns once it serves requests.
// The node is tuned to start in tens of milliseconds: a 100 ms election
// timeout with a 20 ms tick, and no fsync. The data is meant to live as
// long as one job, which is why losing it on a machine crash is acceptable.
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{log: log.With("component", "bootstrap"), closed: make(chan struct{})}

	dir := cfg.DataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "rdmacell-etcd-")
		if err != nil {
			return nil, fmt.Errorf("bootstrap: etcd data dir: %w", err)
		}
		dir, s.tempDir = d, d
	}

	ec, err := embedConfig(cfg, dir)
	if err != nil {
		s.removeTempDir()
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		s.removeTempDir()
		return nil, fmt.Errorf("bootstrap: start etcd (clients on %s): %w", ec.ListenClientUrls[0].Host, err)
	}
	s.etcd = e

	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		_ = s.Close(context.Background())
		return nil, fmt.Errorf("bootstrap: etcd failed while starting: %w", err)
	case <-ctx.Done():
		_ = s.Close(context.Background())
		return nil, fmt.Errorf("bootstrap: etcd not ready: %w", ctx.Err())
	}

	scheme := "http://"
	if cfg.TLS != nil {
		scheme = "https://"
	}
	for _, l := range e.Clients {
		s.endpoints = append(s.endpoints, scheme+dialableAddr(l.Addr(), ec.ListenClientUrls[0].Hostname()))
	}
	s.log.Debug("embedded etcd ready", "endpoints", s.endpoints, "data_dir", dir)
	return s, nil
}

// embedConfig translates our configuration into etcd's.
func embedConfig(cfg ServerConfig, dir string) (*embed.Config, error) {
	clientAddr := cfg.ClientAddr
	if clientAddr == "" {
		clientAddr = "127.0.0.1:0"
	}
	peerAddr := cfg.PeerAddr
	if peerAddr == "" {
		peerAddr = "127.0.0.1:0"
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	clientURL, err := listenURL(scheme, clientAddr, "ClientAddr")
	if err != nil {
		return nil, err
	}
	peerURL, err := listenURL("http", peerAddr, "PeerAddr")
	if err != nil {
		return nil, err
	}

	ec := embed.NewConfig()
	ec.Name = "rdmacell"
	ec.Dir = dir
	// A single node elects itself as soon as its election timeout passes, so
	// a short timeout is a fast start; the tick must be at most a fifth of it.
	// The tick is also what the idle server wakes up for, so it is the
	// longest that allows: a 10 ms tick started no faster (median first put
	// 110-120 ms after start either way, 15 starts each) and cost the idle
	// launcher that hosts the server about a third more CPU (1.9-2.5% of a
	// core against 1.6%). Longer ticks need a longer election timeout,
	// which does slow the start.
	ec.TickMs = 20
	ec.ElectionMs = 100
	ec.UnsafeNoFsync = true
	ec.EnableGRPCGateway = false
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.InitialCluster = ec.Name + "=" + peerURL.String()
	ec.LogLevel = "error"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	if cfg.TLS != nil {
		if cfg.TLS.CertFile == "" || cfg.TLS.KeyFile == "" {
			return nil, fmt.Errorf("bootstrap: server TLS needs CertFile and KeyFile (got %q and %q)",
				cfg.TLS.CertFile, cfg.TLS.KeyFile)
		}
		ec.ClientTLSInfo = transport.TLSInfo{
			CertFile:       cfg.TLS.CertFile,
			KeyFile:        cfg.TLS.KeyFile,
			TrustedCAFile:  cfg.TLS.CAFile,
			ClientCertAuth: cfg.TLS.CAFile != "",
		}
	}
	return ec, nil
}

// listenURL checks a host:port and makes it the URL etcd wants.
func listenURL(scheme, addr, field string) (*url.URL, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: server %s %q: want host:port: %w", field, addr, err)
	}
	if host != "localhost" && net.ParseIP(host) == nil {
		return nil, fmt.Errorf("bootstrap: server %s %q: host must be an IP address or localhost", field, addr)
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}, nil
}

// dialableAddr turns a listener address into one a local client can dial:
// a server bound to every interface is reached through loopback, of the
// address family that was asked for (a listener on "0.0.0.0" may report
// itself as "[::]").
func dialableAddr(a net.Addr, configuredHost string) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	lo := "127.0.0.1"
	if ip := net.ParseIP(configuredHost); ip != nil && ip.To4() == nil {
		lo = "::1"
	}
	return net.JoinHostPort(lo, strconv.Itoa(tcp.Port))
}

// Endpoints are the client URLs of the server, with the ports actually
// bound, e.g. "http://127.0.0.1:40123". A server listening on every
// interface is given by its loopback address.
func (s *Server) Endpoints() []string { return append([]string(nil), s.endpoints...) }

// ClientConfig is a configuration that reaches this server from the same
// machine. For a TLS server the caller still adds the client's TLS files.
func (s *Server) ClientConfig() ClientConfig { return ClientConfig{Endpoints: s.Endpoints()} }

// Close stops the server and removes its temporary data directory. It
// returns when both are done or when ctx ends, whichever is first; in the
// latter case the shutdown finishes in the background. Close is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		go func() {
			defer close(s.closed)
			if s.etcd != nil {
				s.etcd.Close()
			}
			s.closeErr = s.removeTempDir()
		}()
	})
	select {
	case <-s.closed:
		return s.closeErr
	case <-ctx.Done():
		return fmt.Errorf("bootstrap: stop etcd: %w", ctx.Err())
	}
}

// removeTempDir deletes the data directory we created, if any.
func (s *Server) removeTempDir() error {
	if s.tempDir == "" {
		return nil
	}
	if err := os.RemoveAll(s.tempDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("bootstrap: remove etcd data dir: %w", err)
	}
	return nil
}
