package cpython

import (
	"errors"
	"fmt"
)

// Error is a Python exception turned into a Go value.
type Error struct {
	Type      string // e.g. "ZeroDivisionError", or "module.Name" outside builtins
	Message   string // str(exception)
	Traceback string // traceback.format_exception, for people; never for optimizers
}

// Error formats the exception as Python's last traceback line does:
// "Type: message", or the type alone when the message is empty.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Type
	}
	return e.Type + ": " + e.Message
}

// interrupted reports whether the exception is the one Interrupt raises.
func (e *Error) interrupted() bool { return e.Type == "_skynet_host.Interrupted" }

// decodeError reads the three strings sky_fetch_error writes.
func decodeError(b []byte) *Error {
	d := decoder{b: b}
	var parts [3]string
	for i := range parts {
		s, err := d.str()
		if err != nil {
			return &Error{Type: "SystemError", Message: fmt.Sprintf("undecodable Python error: %v", err)}
		}
		parts[i] = s
	}
	return &Error{Type: parts[0], Message: parts[1], Traceback: parts[2]}
}

// AsErrorValue decodes an error as sky_fetch_error writes it.
func AsErrorValue(data []byte) *Error { return decodeError(data) }

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var pe *Error
	ok := errors.As(err, &pe)
	return pe, ok
}
