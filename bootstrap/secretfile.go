package bootstrap

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A secret file holds a user's long-lived key, from which the secret of
// each job the user starts without cellrun (with srun or mpirun) is
// derived: the ranks of one job, on any node that sees the file, derive
// the same job secret, and nothing secret is on a command line or in the
// store. The file is like an ssh private key: 64 hexadecimal digits,
// readable by its owner only.

// LoadSecretFile reads the key in the file at path. It refuses a file that
// is not a regular file owned by this user with no access for group or
// others (mode 0600 or 0400), naming the path and the mode found. If the
// file does not exist and create is set, a fresh key is written there
// first (mode 0600, its directory made 0700 if missing); processes that
// race to create it all end up reading the one that won.
func LoadSecretFile(path string, create bool) ([]byte, error) {
	b, err := readSecretFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := createSecretFile(path); err != nil {
			return nil, err
		}
		b, err = readSecretFile(path)
	}
	return b, err
}

func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: secret file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("bootstrap: secret file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("bootstrap: secret file %s is a %v, want a regular file", path, st.Mode().Type())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("bootstrap: secret file %s has mode %04o: others can read it; want 0600 (chmod 600 %s, and make a new one if it was exposed)", path, perm, path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("bootstrap: secret file %s is owned by uid %d, want this user (uid %d)", path, sys.Uid, os.Geteuid())
	}
	buf := make([]byte, 4*SecretSize)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return nil, fmt.Errorf("bootstrap: secret file %s: %w", path, err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(buf[:n])))
	if err != nil || len(key) != SecretSize {
		return nil, fmt.Errorf("bootstrap: secret file %s: want %d hexadecimal digits", path, 2*SecretSize)
	}
	return key, nil
}

// createSecretFile writes a fresh key at path unless a file is there: the
// key goes to a private temporary file that is then linked into place,
// which fails if another process linked its own first.
func createSecretFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("bootstrap: secret file: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".secret-*")
	if err != nil {
		return fmt.Errorf("bootstrap: secret file: %w", err)
	}
	defer os.Remove(tmp.Name())
	key := make([]byte, SecretSize)
	_, _ = rand.Read(key) // crypto/rand does not fail on Linux
	_, err = tmp.WriteString(hex.EncodeToString(key) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600) // CreateTemp's mode already; umask cannot widen it
	}
	if err != nil {
		return fmt.Errorf("bootstrap: secret file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("bootstrap: secret file: %w", err)
	}
	return nil
}

// DeriveJobSecret derives the secret of job from a user's key (see
// LoadSecretFile): the same for every rank of the job, different for every
// job, and no help in finding the key or another job's secret.
func DeriveJobSecret(key []byte, job string) ([]byte, error) {
	if len(key) < SecretSize {
		return nil, fmt.Errorf("bootstrap: key of %d bytes, want at least %d", len(key), SecretSize)
	}
	return hkdf.Key(sha256.New, key, nil, "rdmacell job secret v1 "+job, SecretSize)
}
