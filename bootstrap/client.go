package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultDialTimeout bounds connection set-up (and authentication) to etcd
// when ClientConfig.DialTimeout is zero.
const DefaultDialTimeout = 5 * time.Second

// ClientConfig says how to reach an etcd cluster.
type ClientConfig struct {
	// Endpoints are "host:port" or "http(s)://host:port" addresses of the
	// cluster's members. Without a scheme, https is used when TLS is set.
	Endpoints []string
	// DialTimeout bounds connection set-up; zero means DefaultDialTimeout.
	// Every operation is still bounded by its own context.
	DialTimeout time.Duration
	// TLS, if set, enables TLS: CAFile verifies the servers, CertFile and
	// KeyFile are this client's certificate for client-certificate auth.
	TLS *TLSFiles
	// Username and Password, if set, authenticate with etcd's auth.
	Username string
	Password string
}

// TLSFiles names the PEM files of a client: CAFile verifies the server and
// CertFile/KeyFile are the client's own certificate (both or neither).
type TLSFiles struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// ParseEndpoints splits a comma-separated endpoint list such as
// "10.0.0.1:2379,10.0.0.2:2379" (the form of --etcd and
// RDMACELL_ETCD_ENDPOINTS), dropping blanks and checking each entry.
func ParseEndpoints(s string) ([]string, error) {
	var eps []string
	for _, ep := range strings.Split(s, ",") {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			continue
		}
		if _, err := endpointURL(ep, false); err != nil {
			return nil, err
		}
		eps = append(eps, ep)
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("bootstrap: etcd endpoints %q: no endpoint given, want host:port[,host:port...]", s)
	}
	return eps, nil
}

// endpointURL checks one endpoint and gives it an explicit scheme, so that
// the client's choice of TLS never depends on guessing. A unix socket is
// given as unix:///absolute/path (unixs:// with TLS).
func endpointURL(ep string, secure bool) (string, error) {
	if rest, ok := strings.CutPrefix(ep, "unix://"); ok {
		if !strings.HasPrefix(rest, "/") {
			return "", fmt.Errorf("bootstrap: etcd endpoint %q: want unix:///absolute/path", ep)
		}
		if secure {
			return "unixs://" + rest, nil
		}
		return ep, nil
	}
	if !strings.Contains(ep, "://") {
		scheme := "http://"
		if secure {
			scheme = "https://"
		}
		ep = scheme + ep
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", fmt.Errorf("bootstrap: etcd endpoint %q: %w", ep, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("bootstrap: etcd endpoint %q: scheme %q, want http, https or unix", ep, u.Scheme)
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return "", fmt.Errorf("bootstrap: etcd endpoint %q: want host:port: %w", ep, err)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Pacing of the reachability check that precedes every client (see
// [ClientConfig.probe]): probeAttempts rounds over the endpoints, the
// pauses between them doubling from probeFirstPause (0.25+0.5+1+2 s), each
// connection attempt bounded by probeDialTimeout. An etcd that refuses
// connections or whose name does not resolve is thus reported within about
// 4 s (or less, when ctx ends first), not when the rendezvous times out:
// etcd's own client never gives up on a connection, it only lets a request
// wait for it.
const (
	probeAttempts    = 5
	probeFirstPause  = 250 * time.Millisecond
	probeDialTimeout = time.Second
)

// newClient builds an etcd client once one endpoint accepts connections
// (see probe). It waits for a connection only to authenticate, and then no
// longer than ctx allows; otherwise the first request does, under its own
// context.
func (c ClientConfig) newClient(ctx context.Context) (*clientv3.Client, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("bootstrap: no etcd endpoints configured")
	}
	cfg := clientv3.Config{
		DialTimeout: c.DialTimeout,
		Username:    c.Username,
		Password:    c.Password,
		// etcd's client logs through zap; our own logs go through slog and
		// say what matters to a job.
		Logger: zap.NewNop(),
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if deadline, ok := ctx.Deadline(); ok {
		cfg.DialTimeout = max(min(cfg.DialTimeout, time.Until(deadline)), time.Millisecond)
	}
	for _, ep := range c.Endpoints {
		u, err := endpointURL(ep, c.TLS != nil)
		if err != nil {
			return nil, err
		}
		cfg.Endpoints = append(cfg.Endpoints, u)
	}
	if c.TLS != nil {
		tc, err := c.TLS.clientConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	if err := probe(ctx, cfg.Endpoints, cfg.TLS); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("bootstrap: etcd at %v: %w: %w", c.Endpoints, ErrUnreachable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("bootstrap: connect to etcd at %v: %w", c.Endpoints, err)
	}
	return cli, nil
}

// Probe checks, with the bounded retries every client makes, that one of
// the endpoints accepts connections (and, with TLS, that the server's
// certificate verifies). A launcher uses it to fail before it starts
// anything that needs etcd. Its error wraps ErrUnreachable unless the
// server was reached but not trusted.
func (c ClientConfig) Probe(ctx context.Context) error {
	var urls []string
	for _, ep := range c.Endpoints {
		u, err := endpointURL(ep, c.TLS != nil)
		if err != nil {
			return err
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return errors.New("bootstrap: no etcd endpoints configured")
	}
	var tc *tls.Config
	if c.TLS != nil {
		var err error
		if tc, err = c.TLS.clientConfig(); err != nil {
			return err
		}
	}
	return probe(ctx, urls, tc)
}

// probe returns once one of urls accepts a connection and, with TLS,
// completes a handshake that verifies the server. It tries probeAttempts
// rounds; when they all fail, or ctx ends, the error wraps ErrUnreachable
// and names the endpoints and the last failure. A server whose certificate
// does not verify fails at once and not as ErrUnreachable: waiting will not
// change it.
func probe(ctx context.Context, urls []string, tc *tls.Config) error {
	var last error
	pause := probeFirstPause
	for attempt := 1; ; attempt++ {
		for _, u := range urls {
			err := probeOne(ctx, u, tc)
			if err == nil {
				return nil
			}
			var cert *tls.CertificateVerificationError
			if errors.As(err, &cert) {
				return fmt.Errorf("bootstrap: etcd at %s: %w", u, err)
			}
			last = fmt.Errorf("%s: %w", u, err)
		}
		if attempt == probeAttempts {
			return fmt.Errorf("bootstrap: etcd at %v: %w after %d attempts: %w", urls, ErrUnreachable, attempt, last)
		}
		select {
		case <-time.After(pause):
			pause *= 2
		case <-ctx.Done():
			return fmt.Errorf("bootstrap: etcd at %v: %w: %w (last attempt: %w)", urls, ErrUnreachable, ctx.Err(), last)
		}
	}
}

// probeOne connects to one endpoint URL, as checked by endpointURL.
func probeOne(ctx context.Context, endpoint string, tc *tls.Config) error {
	network, addr, secure := "tcp", "", false
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		network, addr = "unix", strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "unixs://"):
		network, addr, secure = "unix", strings.TrimPrefix(endpoint, "unixs://"), true
	default:
		u, err := url.Parse(endpoint)
		if err != nil {
			return err
		}
		addr, secure = u.Host, u.Scheme == "https"
	}
	ctx, cancel := context.WithTimeout(ctx, probeDialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if !secure || tc == nil {
		return nil
	}
	cfg := tc.Clone()
	if cfg.ServerName == "" && network == "tcp" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	return tls.Client(conn, cfg).HandshakeContext(ctx)
}

// ClientTLS is the client-side TLS configuration the files make, as every
// client of a ClientConfig with these files uses.
func (f *TLSFiles) ClientTLS() (*tls.Config, error) { return f.clientConfig() }

// clientConfig loads the files into a client-side TLS configuration.
func (f *TLSFiles) clientConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pool, err := loadCertPool(f.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if f.CertFile != "" || f.KeyFile != "" {
		if f.CertFile == "" || f.KeyFile == "" {
			return nil, fmt.Errorf("bootstrap: TLS client certificate needs both CertFile and KeyFile (got %q and %q)",
				f.CertFile, f.KeyFile)
		}
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: TLS client certificate %s / %s: %w", f.CertFile, f.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// loadCertPool reads a PEM bundle of CA certificates.
func loadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: TLS CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("bootstrap: TLS CA file %s: no PEM certificate found", file)
	}
	return pool, nil
}
