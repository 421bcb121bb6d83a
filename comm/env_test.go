package comm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// goodEnv is a complete, valid environment.
func goodEnv() map[string]string {
	return map[string]string{
		EnvRank:           "2",
		EnvWorldSize:      "4",
		EnvLocalRank:      "0",
		EnvLocalWorldSize: "2",
		EnvJob:            "job-1.a_b",
		EnvEtcdEndpoints:  "127.0.0.1:2379, http://10.0.0.1:2379",
	}
}

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func TestOptionsFromEnv(t *testing.T) {
	env := goodEnv()
	pem := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(pem, []byte("x"), 0o600))
	for k, v := range map[string]string{
		EnvRendezvousTimeout: "90s", EnvTransport: "tcp", EnvPaths: "8", EnvCellSize: "64KiB",
		EnvPolicy: "spray", EnvDebug: "cell,bootstrap", EnvTCPAddr: "10.1.2.3", EnvHost: "node-7.example",
		EnvSecret: strings.Repeat("ab", bootstrap.SecretSize),
		EnvEtcdCA: pem, EnvEtcdCert: pem, EnvEtcdKey: pem, EnvEtcdUser: "u", EnvEtcdPassword: "p",
		EnvTimeout: "0", EnvStallReport: "2m", EnvTraceDir: "/tmp/tr", EnvFlightOps: "50", EnvMetricsAddr: ":9400",
	} {
		env[k] = v
	}
	o, err := optionsFrom(lookupIn(env))
	require.NoError(t, err)
	require.Equal(t, 2, o.Rank)
	require.Equal(t, 4, o.WorldSize)
	require.Equal(t, 0, o.LocalRank)
	require.Equal(t, 2, o.LocalWorldSize)
	require.Equal(t, "job-1.a_b", o.Job)
	require.Equal(t, []string{"127.0.0.1:2379", "http://10.0.0.1:2379"}, o.Etcd.Endpoints)
	require.Equal(t, 90*time.Second, o.RendezvousTimeout)
	require.Equal(t, TransportTCP, o.Transport)
	require.Equal(t, 8, o.Paths)
	require.Equal(t, int64(64<<10), o.CellSize)
	require.Equal(t, PolicySpray, o.Policy)
	require.Equal(t, "node-7.example", o.Host)
	require.Equal(t, bytes.Repeat([]byte{0xab}, bootstrap.SecretSize), o.Secret)
	require.Equal(t, "cell,bootstrap", o.Debug)
	require.Equal(t, "10.1.2.3", o.TCPAddr)
	require.Equal(t, pem, o.Etcd.TLS.CAFile)
	require.Equal(t, "u", o.Etcd.Username)
	require.Equal(t, NoTimeout, o.Timeout, "0 turns the watchdog off")
	require.Equal(t, 2*time.Minute, o.StallReport)
	require.Equal(t, "/tmp/tr", o.TraceDir)
	require.Equal(t, 50, o.FlightOps)
	require.Equal(t, ":9400", o.MetricsAddr)
	require.NoError(t, o.resolve())
	require.Equal(t, NoTimeout, o.Timeout)

	// The optional knobs, empty, take their defaults.
	for _, k := range []string{EnvTransport, EnvPaths, EnvCellSize, EnvPolicy, EnvDebug, EnvTCPAddr, EnvRendezvousTimeout, EnvTimeout, EnvStallReport} {
		env[k] = ""
	}
	o, err = optionsFrom(lookupIn(env))
	require.NoError(t, err)
	require.NoError(t, o.resolve())
	require.Equal(t, TransportAuto, o.Transport)
	require.Equal(t, DefaultPaths, o.Paths)
	require.Equal(t, DefaultRendezvousTimeout, o.RendezvousTimeout)
	require.Equal(t, DefaultTimeout, o.Timeout)
	require.Equal(t, DefaultStallReport, o.StallReport)
}

// Every variable with a value that cannot be used, and every required one
// missing, is an *EnvError naming the variable and the value.
func TestOptionsFromEnvErrors(t *testing.T) {
	cases := []struct {
		name, value string // value "<unset>" removes the variable
	}{
		{EnvRank, "<unset>"}, {EnvRank, ""}, {EnvRank, "two"}, {EnvRank, "-1"}, {EnvRank, "4"},
		{EnvWorldSize, "<unset>"}, {EnvWorldSize, "0"}, {EnvWorldSize, "4x"},
		{EnvLocalRank, "2"}, {EnvLocalRank, "x"}, {EnvLocalRank, "<unset>"},
		{EnvLocalWorldSize, "5"}, {EnvLocalWorldSize, "0"}, {EnvLocalWorldSize, "<unset>"},
		{EnvJob, "<unset>"}, {EnvJob, "my job"}, {EnvJob, ""},
		{EnvEtcdEndpoints, "<unset>"}, {EnvEtcdEndpoints, ","}, {EnvEtcdEndpoints, "ftp://x:1"}, {EnvEtcdEndpoints, "nohostport"},
		{EnvEtcdCA, "/nonexistent/ca.pem"}, {EnvEtcdCert, "/nonexistent/cert.pem"},
		{EnvEtcdPassword, "secret"},
		{EnvRendezvousTimeout, "soon"}, {EnvRendezvousTimeout, "-5s"}, {EnvRendezvousTimeout, "0s"},
		{EnvTransport, "ib"}, {EnvTransport, "SHM"},
		{EnvPaths, "0"}, {EnvPaths, "65"}, {EnvPaths, "four"},
		{EnvCellSize, "0"}, {EnvCellSize, "-1"}, {EnvCellSize, "4GiB"}, {EnvCellSize, "big"},
		{EnvPolicy, "random"},
		{EnvDebug, "Cell"}, {EnvDebug, "cell,,bootstrap"}, {EnvDebug, "all!"},
		{EnvTCPAddr, "host:port"}, {EnvTCPAddr, "10.0.0.1:99999"}, {EnvTCPAddr, "a b"},
		{EnvHost, ""}, {EnvHost, "a b"}, {EnvHost, strings.Repeat("h", 254)},
		{EnvTimeout, "-1s"}, {EnvTimeout, "ten minutes"}, {EnvStallReport, "1"},
		{EnvFlightOps, "0"}, {EnvFlightOps, "many"}, {EnvMetricsAddr, "9400"}, {EnvMetricsAddr, "h:port"},
	}
	for _, tc := range cases {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			env := goodEnv()
			blamed := tc.name
			if tc.value == "<unset>" {
				delete(env, tc.name)
			} else {
				env[tc.name] = tc.value
			}
			if tc.name == EnvEtcdPassword {
				blamed = EnvEtcdUser // a password needs a user
			}
			_, err := optionsFrom(lookupIn(env))
			require.Error(t, err)
			var ee *EnvError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, blamed, ee.Var, "%v", err)
			require.ErrorContains(t, err, blamed)
			if tc.value != "<unset>" && tc.value != "" && blamed == tc.name {
				require.ErrorContains(t, err, tc.value)
			}
		})
	}
}

// A bad secret is named, but the error never repeats it.
func TestOptionsFromEnvSecret(t *testing.T) {
	for _, v := range []string{"zz" + strings.Repeat("ab", bootstrap.SecretSize-1), strings.Repeat("ab", 8)} {
		env := goodEnv()
		env[EnvSecret] = v
		_, err := optionsFrom(lookupIn(env))
		var ee *EnvError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, EnvSecret, ee.Var)
		require.NotContains(t, err.Error(), v[2:], "the error repeats the secret")
	}
}

// Explicit options are never overridden by the environment.
func TestExplicitOptionsReadNoEnvironment(t *testing.T) {
	t.Setenv(EnvDebug, "not a list")
	t.Setenv(EnvTransport, "carrier-pigeon")
	store := bootstrap.NewLocalStore()
	defer store.Close()
	c, err := Init(bounded(t), localOptions(store, jobID(t), 0, 1, TransportShm))
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// Several bad variables are all reported.
func TestOptionsFromEnvJoinsErrors(t *testing.T) {
	_, err := optionsFrom(lookupIn(map[string]string{EnvRank: "x", EnvPaths: "0"}))
	for _, v := range []string{EnvRank, EnvWorldSize, EnvJob, EnvEtcdEndpoints, EnvPaths} {
		require.ErrorContains(t, err, v)
	}
}

// Init with zero Options reads the environment; a bad one is an error,
// not a hang.
func TestInitFromEnv(t *testing.T) {
	for k := range goodEnv() {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv(EnvRank, "0")
	t.Setenv(EnvWorldSize, "1")
	t.Setenv(EnvJob, "x")
	t.Setenv(EnvPaths, "zero")
	_, err := Init(bounded(t), Options{})
	var ee *EnvError
	require.True(t, errors.As(err, &ee), "%v", err)
	require.Equal(t, EnvEtcdEndpoints, ee.Var)
	require.ErrorContains(t, err, `RDMACELL_PATHS="zero"`)

	srv := startServer(t)
	t.Setenv(EnvEtcdEndpoints, srv.Endpoints()[0])
	t.Setenv(EnvPaths, "1")
	t.Setenv(EnvJob, jobID(t))
	c, err := Init(bounded(t), Options{Logger: quietLogger()})
	require.NoError(t, err)
	require.Equal(t, 1, c.Size())
	require.Equal(t, 0, c.LocalRank())
	require.Equal(t, 1, c.LocalSize())
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	_, err = c.Isend(0, 0, nil)
	require.ErrorIs(t, err, ErrClosed)
}

// Explicit options are checked too.
func TestOptionErrors(t *testing.T) {
	base := func() Options {
		return Options{Rank: 0, WorldSize: 2, Job: "j", Etcd: goodClient()}
	}
	for _, tc := range []struct {
		field string
		mod   func(*Options)
	}{
		{"Rank", func(o *Options) { o.Rank = 2 }},
		{"Job", func(o *Options) { o.Job = "a/b" }},
		{"Etcd.Endpoints", func(o *Options) { o.Etcd.Endpoints = nil }},
		{"Transport", func(o *Options) { o.Transport = "rdma" }},
		{"Paths", func(o *Options) { o.Paths = 100 }},
		{"Policy", func(o *Options) { o.Policy = "best" }},
		{"CellSize", func(o *Options) { o.CellSize = -1 }},
		{"TCPAddr", func(o *Options) { o.TCPAddr = "::::" }},
		{"LocalRank", func(o *Options) { o.LocalWorldSize, o.LocalRank = 1, 1 }},
		{"Host", func(o *Options) { o.Host = "under_score" }},
		{"Secret", func(o *Options) { o.Secret = []byte("short") }},
		{"Timeout", func(o *Options) { o.Timeout = -time.Second }},
		{"StallReport", func(o *Options) { o.StallReport = -2 }},
		{"FlightOps", func(o *Options) { o.FlightOps = -1 }},
		{"MetricsAddr", func(o *Options) { o.MetricsAddr = "nowhere" }},
	} {
		o := base()
		tc.mod(&o)
		_, err := Init(bounded(t), o)
		var oe *OptionError
		require.ErrorAs(t, err, &oe, tc.field)
		require.Equal(t, tc.field, oe.Field)
		require.ErrorIs(t, err, ErrInvalidArgument)
	}
}

func goodClient() bootstrap.ClientConfig {
	return bootstrap.ClientConfig{Endpoints: []string{"127.0.0.1:2379"}}
}
