package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap/etcdserver"
)

// TestClientTLSCertificates joins through an etcd that requires client
// certificates, with one, without one, and with files that are missing.
func TestClientTLSCertificates(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testContext(t)
	srv, err := etcdserver.Start(ctx, etcdserver.Config{
		TLS:    &etcdserver.TLSFiles{CertFile: pki.serverCert, KeyFile: pki.serverKey, ClientCAFile: pki.ca},
		Logger: quietLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	require.True(t, strings.HasPrefix(srv.Endpoints()[0], "https://"), srv.Endpoints()[0])

	// Endpoints given without a scheme get https because TLS is set.
	hostPort := strings.TrimPrefix(srv.Endpoints()[0], "https://")
	cc := ClientConfig{
		Endpoints: []string{hostPort},
		TLS:       &TLSFiles{CAFile: pki.ca, CertFile: pki.clientCert, KeyFile: pki.clientKey},
	}
	j := join(t, rankConfig(cc, "tls", 0, 1))
	_, err = j.WaitWorld(ctx)
	require.NoError(t, err)

	// Without a client certificate the server turns us away; the join
	// fails within its deadline instead of hanging.
	noCert := cc
	noCert.TLS = &TLSFiles{CAFile: pki.ca}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = Join(short, rankConfig(noCert, "tls", 0, 1))
	require.ErrorIs(t, err, ErrUnreachable)
	t.Log(err)

	badFiles := cc
	badFiles.TLS = &TLSFiles{CAFile: filepath.Join(t.TempDir(), "missing.pem")}
	_, err = Join(ctx, rankConfig(badFiles, "tls", 0, 1))
	require.ErrorContains(t, err, "TLS CA file")
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestClientUsernamePassword(t *testing.T) {
	srv := startServer(t)
	ctx := testContext(t)
	admin, err := clientOf(srv).newClient(ctx)
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.UserAdd(ctx, "root", "s3cret")
	require.NoError(t, err)
	_, err = admin.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = admin.AuthEnable(ctx)
	require.NoError(t, err)

	cc := clientOf(srv)
	cc.Username, cc.Password = "root", "s3cret"
	j := join(t, rankConfig(cc, "auth", 0, 1))
	_, err = j.WaitWorld(ctx)
	require.NoError(t, err)

	cc.Password = "wrong"
	_, err = Join(ctx, rankConfig(cc, "auth", 0, 1))
	require.ErrorContains(t, err, "authentication failed")
}

func TestParseEndpoints(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "127.0.0.1:2379", want: []string{"127.0.0.1:2379"}},
		{in: " a:1 , http://b:2,, https://[::1]:3 ", want: []string{"a:1", "http://b:2", "https://[::1]:3"}},
		{in: "", wantErr: "no endpoint given"},
		{in: " , ", wantErr: "no endpoint given"},
		{in: "a:1,nohost", wantErr: `"http://nohost": want host:port`},
		{in: "unix://x:1", wantErr: `want unix:///absolute/path`},
		{in: "unix:///run/etcd.sock", want: []string{"unix:///run/etcd.sock"}},
		{in: "ftp://x:1", wantErr: `scheme "ftp"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseEndpoints(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// freeAddr returns a loopback address no one listened on a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// testPKI is a throw-away CA with a server and a client certificate.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	p := testPKI{ca: filepath.Join(dir, "ca.pem")}
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage) (certFile, keyFile string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames:     []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "PRIVATE KEY", keyDER)
		return certFile, keyFile
	}
	p.serverCert, p.serverKey = issue("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = issue("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

func writePEM(t *testing.T, file, kind string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}
