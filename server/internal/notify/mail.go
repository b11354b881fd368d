package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"

	"sluice.dev/server/internal/storage"
)

// errNoRelay is the attempt error of mailto deliveries on a server started
// without --smtp-url; they stay pending (and are retried) until one is set
// or their message expires.
var errNoRelay = errors.New("mailto needs an SMTP relay: start the server with --smtp-url")

// mailer sends notifications through an SMTP relay, as Zaqar's mailto
// task does through its smtp_command: the notification JSON as a
// text/plain body, To the subscriber's address, From and Subject from the
// subscription's options.
type mailer struct {
	addr    string // host:port; "" : no relay
	from    string
	timeout time.Duration
}

func newMailer(uri string, timeout time.Duration) (*mailer, error) {
	m := &mailer{from: "sluice@localhost", timeout: timeout}
	if uri == "" {
		return m, nil
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "smtp" || u.Host == "" {
		return nil, fmt.Errorf("smtp-url %q is not smtp://host:port[?from=address]", uri)
	}
	m.addr = u.Host
	if !strings.Contains(m.addr, ":") {
		m.addr += ":25"
	}
	if f := u.Query().Get("from"); f != "" {
		m.from = f
	}
	return m, nil
}

// address is the mailbox of a mailto: subscriber.
func address(subscriber string) (string, error) {
	u, err := url.Parse(subscriber)
	if err != nil {
		return "", err
	}
	a, err := mail.ParseAddress(u.Opaque + u.Path)
	if err != nil {
		return "", fmt.Errorf("bad mailto subscriber: %w", err)
	}
	return a.Address, nil
}

// send mails one notification with a deadline on the whole SMTP dialogue.
func (m *mailer) send(ctx context.Context, sub storage.Subscription, queue string, body []byte) error {
	if m.addr == "" {
		return errNoRelay
	}
	to, err := address(sub.Subscriber)
	if err != nil {
		return err
	}
	from := m.from
	if f, ok := sub.Options["from"].(string); ok && f != "" {
		from = f
	}
	subject, _ := sub.Options["subject"].(string)
	var msg strings.Builder
	fmt.Fprintf(&msg, "To: %s\r\nFrom: %s\r\nSubject: %s\r\n", to, from, headerSafe(subject))
	msg.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=\"utf-8\"\r\nContent-Transfer-Encoding: 8bit\r\n")
	fmt.Fprintf(&msg, "X-Sluice-Queue: %s\r\n\r\n", headerSafe(queue))
	msg.Write(body)
	msg.WriteString("\r\n")
	return m.deliver(ctx, from, to, msg.String())
}

func headerSafe(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// deliver runs one SMTP transaction.
func (m *mailer) deliver(ctx context.Context, from, to, msg string) error {
	deadline := time.Now().Add(m.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn, err := (&net.Dialer{Deadline: deadline}).DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return err
	}
	_ = conn.SetDeadline(deadline)
	host, _, _ := net.SplitHostPort(m.addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if err := c.Mail(from); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(msg)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
