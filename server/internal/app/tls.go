package app

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"sluice.dev/server/internal/config"
)

// certReloader hands the TLS stack the certificate in certFile/keyFile and
// re-reads the pair when either file's modification time or size changes,
// checked at each handshake (a stat is cheap next to a handshake). A pair
// that does not load (a Secret caught mid-update: new certificate, old key)
// keeps the previous certificate in service and is tried again next time.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	certStat fileStamp
	keyStat  fileStamp
	failed   [2]fileStamp // the stamps of the last pair that did not load
}

// fileStamp tells versions of a file apart; the inode catches a
// replacement by rename (a Secret volume update) even within one mtime tick.
type fileStamp struct {
	mod   time.Time
	size  int64
	inode uint64
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.inode = uint64(sys.Ino)
	}
	return st, nil
}

func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the pair; on failure nothing changes.
func (r *certReloader) load() error {
	cs, err := stamp(r.certFile)
	if err != nil {
		return err
	}
	ks, err := stamp(r.keyFile)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.failed = [2]fileStamp{cs, ks}
		return fmt.Errorf("tls certificate %s / key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certStat, r.keyStat = &cert, cs, ks
	return nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, err1 := stamp(r.certFile)
	ks, err2 := stamp(r.keyFile)
	changed := err1 == nil && err2 == nil && (cs != r.certStat || ks != r.keyStat) &&
		[2]fileStamp{cs, ks} != r.failed
	if changed {
		if err := r.load(); err != nil {
			r.log.Warn("tls: new certificate not loaded, serving the previous one", "error", err.Error())
		} else {
			r.log.Info("tls: certificate reloaded", "cert", r.certFile)
		}
	}
	return r.cert, nil
}

// listenTLS wraps ln in TLS when the options name a certificate.
func listenTLS(ln net.Listener, t config.TLSOptions, log *slog.Logger) (net.Listener, error) {
	if !t.Enabled() {
		return ln, nil
	}
	r, err := newCertReloader(t.CertFile, t.KeyFile, log)
	if err != nil {
		ln.Close()
		return nil, err
	}
	log.Info("serving HTTPS", "cert", t.CertFile)
	return tls.NewListener(ln, &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     []string{"http/1.1"},
	}), nil
}
