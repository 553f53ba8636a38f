package gang

import (
	"context"
	"errors"
	"os"

	"gang.dev/gang/internal/capi"
)

// Status is the C library's gang_status_t: 0 success, 1 in progress,
// negative an error.
type Status int

// The statuses of gang.h.
const (
	StatusOK              Status = 0
	StatusInProgress      Status = 1
	StatusInvalidArgument Status = -1
	StatusUnsupported     Status = -2
	StatusUnavailable     Status = -3
	StatusTimeout         Status = -4
	StatusPeerLost        Status = -5
	StatusMismatch        Status = -6
	StatusAborted         Status = -7
	StatusStore           Status = -8
	StatusNoMemory        Status = -9
	StatusSystem          Status = -10
	StatusInternal        Status = -11
)

// String is the status's C name, e.g. "GANG_ERR_TIMEOUT".
func (s Status) String() string { return capi.Gang_status_name(int(s)) }

// Error is the error every function of the package returns: the status of
// the failed call and the library's message for it, and for a call ended
// by its context (see Context), that context's error.
type Error struct {
	Status Status
	Msg    string
	cause  error
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return "gang: " + capi.Gang_status_string(int(e.Status))
	}
	return "gang: " + e.Msg
}

// Unwrap is the context's error for a call its context ended, else nil.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same status and either
// no message (the sentinels below) or the same one; and, for a timeout or
// a context's deadline, whether target is os.ErrDeadlineExceeded or
// context.DeadlineExceeded.
func (e *Error) Is(target error) bool {
	if target == os.ErrDeadlineExceeded || target == context.DeadlineExceeded {
		return e.Timeout()
	}
	t, ok := target.(*Error)
	return ok && t.Status == e.Status && (t.Msg == "" || t.Msg == e.Msg)
}

// Timeout reports whether the operation timed out, or its context's
// deadline passed (as os.IsTimeout and net.Error ask).
func (e *Error) Timeout() bool {
	return e.Status == StatusTimeout || errors.Is(e.cause, context.DeadlineExceeded)
}

// Sentinels for errors.Is.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrUnavailable     = &Error{Status: StatusUnavailable}
	ErrTimeout         = &Error{Status: StatusTimeout}
	ErrPeerLost        = &Error{Status: StatusPeerLost}
	ErrMismatch        = &Error{Status: StatusMismatch}
	ErrAborted         = &Error{Status: StatusAborted}
	ErrStore           = &Error{Status: StatusStore}
	ErrNoMemory        = &Error{Status: StatusNoMemory}
	ErrSystem          = &Error{Status: StatusSystem}
	ErrInternal        = &Error{Status: StatusInternal}
)

// invalid is an argument error found in Go, before any C call.
func invalid(msg string) error {
	return &Error{Status: StatusInvalidArgument, Msg: msg}
}
