package launcher

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// A join token is what the nodes of a multi-node job share, and all they
// share: 32 random bytes, written "rdmacell1." followed by them in
// unpadded base64url. Everything secret in the job is derived from it
// (HKDF-SHA256, one label per use):
//
//   - the job secret the ranks' tcp connections authenticate with
//     (RDMACELL_SECRET), which therefore never has to enter etcd;
//   - the key of the job's certificate authority, and the key of the
//     etcd client certificate every cellrun and rank of the job presents.
//
// Node 0, serving etcd, makes a server certificate signed by that
// authority and requires client certificates signed by it; every other
// node makes the same authority certificate and client certificate from
// the token (Ed25519 signatures are deterministic, the fields fixed), and
// so both verifies node 0's server and is let in by it. Whoever holds the
// token can join the job, read its store and reach its ranks' memory:
// it is handed to the nodes like a password, never put in the store.
const (
	tokenPrefix = "rdmacell1."
	tokenSize   = 32
)

// jobToken is a parsed join token.
type jobToken [tokenSize]byte

// newToken draws a fresh token.
func newToken() jobToken {
	var t jobToken
	_, _ = rand.Read(t[:]) // crypto/rand does not fail on Linux
	return t
}

// String is the token as --join takes it.
func (t jobToken) String() string {
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(t[:])
}

// parseToken reads a token as String writes it. Its errors never repeat
// the token: it is a secret, even when mistyped.
func parseToken(s string) (jobToken, error) {
	var t jobToken
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), tokenPrefix)
	if !ok {
		return t, fmt.Errorf("want a token printed by cellrun, starting with %q", tokenPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != tokenSize {
		return t, fmt.Errorf("want %q and %d base64url characters", tokenPrefix, base64.RawURLEncoding.EncodedLen(tokenSize))
	}
	copy(t[:], b)
	return t, nil
}

// derive gives n bytes for one use of the token.
func (t jobToken) derive(label string, n int) []byte {
	b, err := hkdf.Key(sha256.New, t[:], nil, "rdmacell "+label, n)
	if err != nil {
		panic(err) // only for n beyond 255 hash lengths
	}
	return b
}

// jobSecret is the ranks' RDMACELL_SECRET.
func (t jobToken) jobSecret() []byte { return t.derive("job secret", bootstrap.SecretSize) }

// newJobSecret is the secret of a job that has no token: one node, a
// fresh one each time cellrun runs.
func newJobSecret() []byte {
	b := make([]byte, bootstrap.SecretSize)
	_, _ = rand.Read(b)
	return b
}

// secretEnv is the secret as RDMACELL_SECRET carries it.
func secretEnv(secret []byte) string { return hex.EncodeToString(secret) }

// Fixed fields of the derived certificates: every node must make the same
// bytes.
var (
	certEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	certEnd   = time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC)
)

// tlsDir is a private directory holding the job's etcd TLS files, removed
// by remove.
type tlsDir struct {
	dir                           string
	caFile, certFile, keyFile     string // what clients (cellrun, the ranks) use
	serverCertFile, serverKeyFile string // node 0 only
}

// writeTLS derives the job's authority and client certificate from t and
// writes them, with a server certificate if serve, into a new private
// directory in the temporary directory.
func writeTLS(t jobToken, serve bool, serveHost string) (*tlsDir, error) {
	dir, err := os.MkdirTemp("", "cellrun-tls-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("TLS files for etcd: %w", err)
	}
	d := &tlsDir{
		dir:      dir,
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "client.pem"),
		keyFile:  filepath.Join(dir, "client.key"),
	}
	if err := d.write(t, serve, serveHost); err != nil {
		return nil, errors.Join(fmt.Errorf("TLS files for etcd: %w", err), d.remove())
	}
	return d, nil
}

func (d *tlsDir) write(t jobToken, serve bool, serveHost string) error {
	caKey := ed25519.NewKeyFromSeed(t.derive("etcd ca key", ed25519.SeedSize))
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "rdmacell job CA"},
		NotBefore:             certEpoch,
		NotAfter:              certEnd,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	if err != nil {
		return err
	}
	ca, err = x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePEM(d.caFile, "CERTIFICATE", caDER); err != nil {
		return err
	}
	clientKey := ed25519.NewKeyFromSeed(t.derive("etcd client key", ed25519.SeedSize))
	client := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "rdmacell job member"},
		NotBefore:    certEpoch,
		NotAfter:     certEnd,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := writeCert(d.certFile, d.keyFile, client, ca, clientKey, caKey); err != nil {
		return err
	}
	if !serve {
		return nil
	}
	// The server's key is node 0's own: a fresh one, never derived.
	_, serverKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	server := &x509.Certificate{
		SerialNumber: serial.Add(serial, big.NewInt(3)),
		Subject:      pkix.Name{CommonName: "rdmacell etcd"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	server.DNSNames, server.IPAddresses = serverNames(serveHost)
	d.serverCertFile, d.serverKeyFile = filepath.Join(d.dir, "server.pem"), filepath.Join(d.dir, "server.key")
	return writeCert(d.serverCertFile, d.serverKeyFile, server, ca, serverKey, caKey)
}

// serverNames are the names node 0's etcd certificate is valid for: every
// name and address of this machine the other nodes (or its own ranks,
// through loopback) may dial.
func serverNames(serveHost string) (dns []string, ips []net.IP) {
	dns = []string{"localhost"}
	if h, err := os.Hostname(); err == nil {
		dns = append(dns, h)
	}
	ips = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip := net.ParseIP(serveHost); ip != nil && !ip.IsUnspecified() {
		ips = append(ips, ip)
	} else if ip == nil && serveHost != "" {
		// A name the other nodes use (a Kubernetes Service's, a Slurm
		// node's) that need not be this host's own.
		dns = append(dns, serveHost)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ips = append(ips, n.IP)
			}
		}
	}
	return dns, ips
}

// writeCert signs tmpl for key with the authority and writes the
// certificate and key as PEM files (the key readable by this user only).
func writeCert(certFile, keyFile string, tmpl, ca *x509.Certificate, key, caKey ed25519.PrivateKey) error {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyFile, "PRIVATE KEY", keyDER)
}

func writePEM(file, typ string, der []byte) error {
	return os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// remove deletes the directory; a nil tlsDir has nothing to remove.
func (d *tlsDir) remove() error {
	if d == nil {
		return nil
	}
	if err := os.RemoveAll(d.dir); err != nil {
		return fmt.Errorf("remove TLS files: %w", err)
	}
	return nil
}
