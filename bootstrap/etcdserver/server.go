package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config configures an embedded etcd server. The zero value serves on
// free loopback ports from a temporary data directory.
type Config struct {
	// ClientAddr is the host:port clients connect to. Empty means
	// "127.0.0.1:0": loopback, a free port. Node 0 of a multi-node job sets
	// it to an address the other nodes can reach.
	ClientAddr string
	// PeerAddr is the raft peer address. Empty means "127.0.0.1:0"; a single
	// node never receives peer traffic, the address only has to be valid.
	PeerAddr string
	// DataDir holds etcd's data. Empty means a fresh temporary directory,
	// removed by Close, or, after an unclean exit, by the next Start
	// of the same user (see sweepDataDirs); a given directory is left in
	// place.
	DataDir string
	// Unix serves clients on a unix socket inside the data directory
	// instead of TCP: only this user (and root) can reach it, since the
	// directory is private (0700). ClientAddr must then be empty. The
	// endpoint is unix:///path/to/socket.
	Unix bool
	// TLS, if set, serves clients over TLS.
	TLS *TLSFiles
	// Logger receives the server's own messages; nil means slog.Default().
	Logger *slog.Logger
}

// TLSFiles names the PEM files of a server that serves its clients over
// TLS.
type TLSFiles struct {
	// CertFile and KeyFile are the server's certificate and its key.
	CertFile, KeyFile string
	// ClientCAFile, if set, makes the server require client certificates
	// signed by the CA it holds.
	ClientCAFile string
}

// Server is a running embedded etcd server.
type Server struct {
	etcd      *embed.Etcd
	endpoints []string
	tempDir   string   // removed by Close; empty when the caller owns DataDir
	lock      *os.File // holds tempDir's lock file locked while the server runs
	log       *slog.Logger

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// Start starts a single-node etcd and returns once it serves requests.
// The node is tuned to start in tens of milliseconds: a 100 ms election
// timeout with a 20 ms tick, and no fsync. The data is meant to live as
// long as one job, which is why losing it on a machine crash is acceptable.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{log: log.With("component", "etcdserver"), closed: make(chan struct{})}

	if cfg.Unix && cfg.ClientAddr != "" {
		return nil, fmt.Errorf("etcdserver: server ClientAddr %q: a server on a unix socket has no address", cfg.ClientAddr)
	}
	dir := cfg.DataDir
	if dir == "" {
		sweepDataDirs(os.TempDir(), s.log)
		d, lock, err := makeDataDir(os.TempDir())
		if err != nil {
			return nil, fmt.Errorf("etcdserver: etcd data dir: %w", err)
		}
		dir, s.tempDir, s.lock = d, d, lock
	}

	ec, err := embedConfig(cfg, dir, s.fatal)
	if err != nil {
		_ = s.removeTempDir()
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		_ = s.removeTempDir()
		return nil, fmt.Errorf("etcdserver: start etcd (clients on %s): %w", ec.ListenClientUrls[0].Host, err)
	}
	s.etcd = e

	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		_ = s.Close(context.Background())
		return nil, fmt.Errorf("etcdserver: etcd failed while starting: %w", err)
	case <-ctx.Done():
		_ = s.Close(context.Background())
		return nil, fmt.Errorf("etcdserver: etcd not ready: %w", ctx.Err())
	}

	scheme := "http://"
	if cfg.TLS != nil {
		scheme = "https://"
	}
	if cfg.Unix {
		s.endpoints = []string{"unix://" + ec.ListenClientUrls[0].Path}
		if cfg.TLS != nil {
			s.endpoints = []string{"unixs://" + ec.ListenClientUrls[0].Path}
		}
	}
	for _, l := range e.Clients {
		if cfg.Unix {
			break
		}
		s.endpoints = append(s.endpoints, scheme+dialableAddr(l.Addr(), ec.ListenClientUrls[0].Hostname()))
	}
	s.log.Debug("embedded etcd ready", "endpoints", s.endpoints, "data_dir", dir)
	return s, nil
}

// maxSocketPath is the longest path a unix socket address holds
// (sun_path, less its terminating zero).
const maxSocketPath = 107

// embedConfig translates our configuration into etcd's. fatal is called on
// etcd's fatal errors, before etcd exits the process.
func embedConfig(cfg Config, dir string, fatal func(string)) (*embed.Config, error) {
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	var clientURL *url.URL
	if cfg.Unix {
		path := filepath.Join(dir, "client.sock")
		if len(path) > maxSocketPath {
			return nil, fmt.Errorf("etcdserver: unix socket %s: longer than %d bytes (set TMPDIR to a shorter directory)", path, maxSocketPath)
		}
		clientURL = &url.URL{Scheme: "unix", Path: path}
		if cfg.TLS != nil {
			clientURL.Scheme = "unixs"
		}
	} else {
		clientAddr := cfg.ClientAddr
		if clientAddr == "" {
			clientAddr = "127.0.0.1:0"
		}
		var err error
		if clientURL, err = listenURL(scheme, clientAddr, "ClientAddr"); err != nil {
			return nil, err
		}
	}
	peerAddr := cfg.PeerAddr
	if peerAddr == "" {
		peerAddr = "127.0.0.1:0"
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
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey, enc.LevelKey, enc.CallerKey = "", "", ""
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(enc),
		zapcore.AddSync(fatalWriter{fatal}),
		zapcore.DPanicLevel,
	), zap.WithFatalHook(fatalExit{})))
	if cfg.TLS != nil {
		if cfg.TLS.CertFile == "" || cfg.TLS.KeyFile == "" {
			return nil, fmt.Errorf("etcdserver: server TLS needs CertFile and KeyFile (got %q and %q)",
				cfg.TLS.CertFile, cfg.TLS.KeyFile)
		}
		ec.ClientTLSInfo = transport.TLSInfo{
			CertFile:       cfg.TLS.CertFile,
			KeyFile:        cfg.TLS.KeyFile,
			TrustedCAFile:  cfg.TLS.ClientCAFile,
			ClientCertAuth: cfg.TLS.ClientCAFile != "",
		}
	}
	return ec, nil
}

// fatalWriter hands the records of etcd's logger, which only passes on
// those of its fatal levels, to the server's fatal handler.
type fatalWriter struct{ fatal func(string) }

func (w fatalWriter) Write(p []byte) (int, error) {
	w.fatal(strings.TrimSpace(string(p)))
	return len(p), nil
}

// fatalExit ends the process after a fatal record of etcd, as etcd expects
// (it does not carry on after one), with the exit code of a failed launch.
type fatalExit struct{}

func (fatalExit) OnWrite(*zapcore.CheckedEntry, []zapcore.Field) { os.Exit(1) }

// fatal reports one of etcd's fatal errors, which end the process: a
// silent exit would leave the user nothing to go on (running out of file
// descriptors is the usual cause), and the data directory would stay.
func (s *Server) fatal(msg string) {
	s.log.Error("embedded etcd failed; exiting", "etcd", msg)
	_ = s.removeTempDir()
}

// listenURL checks a host:port and makes it the URL etcd wants.
func listenURL(scheme, addr, field string) (*url.URL, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: server %s %q: want host:port: %w", field, addr, err)
	}
	if host != "localhost" && net.ParseIP(host) == nil {
		return nil, fmt.Errorf("etcdserver: server %s %q: host must be an IP address or localhost", field, addr)
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
		return fmt.Errorf("etcdserver: stop etcd: %w", ctx.Err())
	}
}

// removeTempDir deletes the data directory we created, if any, and then
// lets go of its lock.
func (s *Server) removeTempDir() error {
	if s.tempDir == "" {
		return nil
	}
	err := os.RemoveAll(s.tempDir)
	if s.lock != nil {
		_ = s.lock.Close()
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("etcdserver: remove etcd data dir: %w", err)
	}
	return nil
}
