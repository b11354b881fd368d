// Package fault injects the faults an operator runs inside a Redis shard's
// pod, as an ephemeral container sharing the pod's network namespace: a
// partition of the shard's port (nftables drop rules), a delay on it (an
// nftables redirect to a delaying userspace proxy, because the kernels it
// targets have no sch_netem) and a full shard (filler keys up to
// maxmemory). Each fault is bounded in time and undoes everything it did
// before Run returns, whether its duration ended or a signal came.
package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// MaxDuration bounds every fault: one that outlives the benchmark watching
// it would only be an outage.
const MaxDuration = time.Hour

// UndoTimeout bounds the undo. Kubernetes sends SIGKILL 30 s after SIGTERM
// by default, so the undo must finish well inside that.
const UndoTimeout = 20 * time.Second

// Fault is one kind of fault.
type Fault interface {
	// Kind names the fault in its JSON lines ("partition", "delay", "fill").
	Kind() string
	// Inject puts the fault in place and returns what the injected line
	// reports. When it fails it has already undone whatever it did.
	Inject(ctx context.Context) (details any, err error)
	// Hold keeps the fault in place until ctx ends; an error means the
	// fault broke while held.
	Hold(ctx context.Context) error
	// Undo removes the fault within ctx and returns what the undone line
	// reports. It runs once, after a successful Inject.
	Undo(ctx context.Context) (details any, err error)
	// Summary is the one-line account of a fault that ran and was undone,
	// held for held and ended by stoppedBy ("duration", "SIGTERM", ...).
	Summary(held time.Duration, stoppedBy string) string
}

// Options says how long a fault lasts and where its reports go.
type Options struct {
	Duration time.Duration
	// Signals ends the fault early (SIGTERM, SIGINT); nil for none.
	Signals <-chan os.Signal
	// Stdout receives the injected and undone JSON lines.
	Stdout io.Writer
	// TerminationLog receives the one-line summary, only if the file
	// already exists: Kubernetes creates it for the container, and
	// anywhere else nothing should be created.
	TerminationLog string
}

// errDurationEnded is the run context's cause when the duration elapses.
var errDurationEnded = errors.New("duration ended")

// signalCause is the run context's cause when a signal ends the fault.
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return "stopped by " + signalName(s.sig) }

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return s.String()
}

// injectedLine and undoneLine start the JSON lines; the fault's own
// details follow in the same object.
type injectedLine struct {
	Fault    string    `json:"fault"`
	Injected time.Time `json:"injected"`
}

type undoneLine struct {
	Fault     string    `json:"fault"`
	Undone    time.Time `json:"undone"`
	HeldFor   string    `json:"heldFor"`
	StoppedBy string    `json:"stoppedBy"`
	Error     string    `json:"error,omitempty"`
}

// Run injects f, holds it for opts.Duration or until a signal, undoes it
// and reports. The error, if any, is one line and comes after the undo.
func Run(parent context.Context, f Fault, opts Options) error {
	if opts.Duration <= 0 || opts.Duration > MaxDuration {
		return fmt.Errorf("duration %v is not in (0, %v]", opts.Duration, MaxDuration)
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, opts.Duration, errDurationEnded)
	defer stop()
	if opts.Signals != nil {
		go func() {
			select {
			case s := <-opts.Signals:
				cancel(signalCause{s})
			case <-ctx.Done():
			}
		}()
	}

	details, err := f.Inject(ctx)
	if err != nil {
		err = fmt.Errorf("%s: %w", f.Kind(), err)
		writeTerminationLog(opts.TerminationLog, "fault "+err.Error())
		return err
	}
	injected := time.Now().UTC()
	emit(opts.Stdout, injectedLine{Fault: f.Kind(), Injected: injected}, details)

	holdErr := f.Hold(ctx)
	stoppedBy := stopReason(ctx, holdErr)
	held := time.Since(injected)

	undoCtx, undoCancel := context.WithTimeout(context.WithoutCancel(parent), UndoTimeout)
	defer undoCancel()
	undone, undoErr := f.Undo(undoCtx)
	if undoErr != nil {
		undoErr = fmt.Errorf("undo: %w", undoErr)
	}
	failure := errors.Join(holdErr, undoErr)
	line := undoneLine{Fault: f.Kind(), Undone: time.Now().UTC(), HeldFor: held.Round(time.Millisecond).String(), StoppedBy: stoppedBy}
	if failure != nil {
		line.Error = oneLine(failure)
	}
	emit(opts.Stdout, line, undone)

	if failure != nil {
		err := fmt.Errorf("%s: %s", f.Kind(), oneLine(failure))
		writeTerminationLog(opts.TerminationLog, "fault "+err.Error())
		return err
	}
	writeTerminationLog(opts.TerminationLog, f.Summary(held, stoppedBy))
	return nil
}

// stopReason says what ended the hold.
func stopReason(ctx context.Context, holdErr error) string {
	var sc signalCause
	switch cause := context.Cause(ctx); {
	case errors.As(cause, &sc):
		return signalName(sc.sig)
	case errors.Is(cause, errDurationEnded):
		return "duration"
	case holdErr != nil:
		return "error"
	case cause != nil:
		return cause.Error()
	}
	return "duration"
}

// emit writes one JSON object: head's fields, then details' fields.
func emit(w io.Writer, head, details any) {
	if w == nil {
		return
	}
	h, err := json.Marshal(head)
	if err != nil {
		return
	}
	line := append([]byte(nil), h...)
	if details != nil {
		if d, err := json.Marshal(details); err == nil && len(d) > 2 && d[0] == '{' {
			line = append(line[:len(line)-1], ',')
			line = append(line, d[1:]...)
		}
	}
	_, _ = w.Write(append(line, '\n'))
}

// writeTerminationLog replaces the content of path, if that file exists,
// with msg. A missing or unwritable file is not an error: outside
// Kubernetes there is no termination log.
func writeTerminationLog(path, msg string) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	_, _ = f.WriteString(oneLine(errors.New(msg)) + "\n")
	_ = f.Close()
}

// oneLine flattens an error (errors.Join puts a newline between errors).
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
