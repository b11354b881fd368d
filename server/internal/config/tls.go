package config

import (
	"crypto/tls"
	"fmt"
)

// TLSOptions make the listener serve HTTPS. The files are typically a
// Kubernetes Secret mount (tls.crt, tls.key); they are re-read when they
// change, so a renewed certificate is served without a restart.
type TLSOptions struct {
	CertFile string
	KeyFile  string
}

// Enabled reports whether HTTPS is configured.
func (t TLSOptions) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

func (o *Options) validateTLS() []error {
	t := o.TLS
	if !t.Enabled() {
		return nil
	}
	if t.CertFile == "" || t.KeyFile == "" {
		return []error{fmt.Errorf("tls-cert-file and tls-key-file: give both or neither")}
	}
	if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
		return []error{fmt.Errorf("tls-cert-file/tls-key-file: %v", err)}
	}
	return nil
}

func tlsOptions() []option {
	cert, certGet := str(func(o *Options) *string { return &o.TLS.CertFile })
	key, keyGet := str(func(o *Options) *string { return &o.TLS.KeyFile })
	return []option{
		opt("tls-cert-file", "PEM certificate (chain) to serve HTTPS with; re-read when it changes", cert, certGet),
		opt("tls-key-file", "PEM private key of tls-cert-file", key, keyGet),
	}
}

func init() { options = append(options, tlsOptions()...) }
