package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// CA is a throwaway certificate authority for TLS tests: it signs loopback
// server certificates, as the operator's generated CA or cert-manager would.
type CA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA valid for an hour.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Pool: pool, key: key}
}

// WriteCert writes the CA certificate as PEM (a client's trust bundle).
func (ca *CA) WriteCert(t testing.TB, path string) {
	t.Helper()
	WriteFileAtomic(t, path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}))
}

// Issue writes a server certificate for 127.0.0.1 with the given serial,
// and its key, each replaced by rename as a Secret volume update does.
func (ca *CA) Issue(t testing.TB, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "sluice-server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	WriteFileAtomic(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	WriteFileAtomic(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// WriteFileAtomic replaces a file by rename.
func WriteFileAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// RedisTLS is a redis-server that also listens with TLS, its certificate
// signed by a private CA.
type RedisTLS struct {
	*Redis
	// URL is rediss://127.0.0.1:<tls port>/0 trusting the CA (tls_ca_file).
	URL string
	// NoCAURL is the same without tls_ca_file: the system roots, which do
	// not know the CA.
	NoCAURL string
}

// StartRedisTLS starts redis-server with a TLS port (Debian's is built
// with TLS); it fails or skips as StartRedis does.
func StartRedisTLS(t testing.TB) *RedisTLS {
	t.Helper()
	dir := t.TempDir()
	ca := NewCA(t)
	crt, key, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	ca.Issue(t, crt, key, 7)
	ca.WriteCert(t, caFile)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	r := StartRedis(t, RedisOptions{Args: []string{
		"--tls-port", strconv.Itoa(port), "--tls-cert-file", crt, "--tls-key-file", key,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no",
	}})
	base := "rediss://127.0.0.1:" + strconv.Itoa(port) + "/0"
	return &RedisTLS{Redis: r, URL: base + "?tls_ca_file=" + url.QueryEscape(caFile), NoCAURL: base}
}
