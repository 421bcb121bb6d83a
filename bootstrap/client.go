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

// TLSFiles names PEM files. For a client, CAFile verifies the server and
// CertFile/KeyFile are the client's own certificate (both or neither). For
// [StartServer], CertFile/KeyFile are the server's certificate and CAFile, if
// set, makes the server require client certificates signed by it.
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
// the client's choice of TLS never depends on guessing.
func endpointURL(ep string, secure bool) (string, error) {
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
		return "", fmt.Errorf("bootstrap: etcd endpoint %q: scheme %q, want http or https", ep, u.Scheme)
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return "", fmt.Errorf("bootstrap: etcd endpoint %q: want host:port: %w", ep, err)
	}
	return u.Scheme + "://" + u.Host, nil
}

// newClient builds an etcd client. It waits for a connection only to
// authenticate, and then no longer than ctx allows; otherwise the first
// request does, under its own context.
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
	cli, err := clientv3.New(cfg)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("bootstrap: etcd at %v: %w: %w", c.Endpoints, ErrUnreachable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("bootstrap: connect to etcd at %v: %w", c.Endpoints, err)
	}
	return cli, nil
}

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
