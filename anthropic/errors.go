package anthropic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Error types of the Messages API, as sent in the error object's "type".
const (
	InvalidRequestError = "invalid_request_error" // 400 and other 4xx
	AuthenticationError = "authentication_error"  // 401
	PermissionError     = "permission_error"      // 403
	NotFoundError       = "not_found_error"       // 404
	RequestTooLarge     = "request_too_large"     // 413
	RateLimitError      = "rate_limit_error"      // 429
	APIError            = "api_error"             // 500, and ctxguard's own 502/504
	OverloadedError     = "overloaded_error"      // 529
)

// Error is an error that ctxguard itself answers a client with. It is
// rendered the way the Messages API renders errors:
//
//	{"type":"error","error":{"type":"api_error","message":"..."},"request_id":"ctxguard_..."}
//
// Message is shown to the client and must be safe to show: it never holds
// request content or credentials. Err is the detail; it goes only to the
// log. ID ties the two together: it is sent as the body's request_id and
// in the message, and logged with the detail.
type Error struct {
	Status  int    // HTTP status; 0 means 500
	Type    string // API error type (one of the constants above); "" means api_error
	Message string // safe, client-facing text
	ID      string // error ID; WriteError assigns one when empty
	Err     error  // detail for the log only; may be nil
}

// Errorf returns an *Error with a client-facing message and a detail error.
func Errorf(status int, typ string, detail error, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Message: fmt.Sprintf(format, args...), Err: detail}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// NewErrorID returns a fresh, random error ID ("ctxguard_" + 16 hex digits).
func NewErrorID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ctxguard_" + hex.EncodeToString(b[:])
}

// AppendErrorJSON appends an API-shaped error body to dst. requestID may be
// empty, in which case request_id is null.
func AppendErrorJSON(dst []byte, typ, message, requestID string) []byte {
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = jsonscan.AppendQuote(dst, typ)
	dst = append(dst, `,"message":`...)
	dst = jsonscan.AppendQuote(dst, message)
	dst = append(dst, `},"request_id":`...)
	if requestID == "" {
		dst = append(dst, "null"...)
	} else {
		dst = jsonscan.AppendQuote(dst, requestID)
	}
	return append(dst, '}')
}

// AsError converts any error to an *Error, so it can be rendered. An
// *Error anywhere in err's chain is used as it is; a bare error becomes a
// 500 api_error whose detail is err.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Type: APIError, Message: "ctxguard: internal error", Err: err}
}

// WriteError is the one place where ctxguard renders its own errors to a
// client. It converts err with AsError, assigns an ID when the error has
// none, logs the ID, status and detail (never headers or bodies) to log,
// and writes the JSON body with the error's status. The client sees the
// safe message and the ID, never the detail.
//
// It must be called before anything of the response was written. When the
// client has gone away (ctx canceled), it only logs, at debug level.
func WriteError(ctx context.Context, w http.ResponseWriter, log *slog.Logger, err error) {
	e := AsError(err)
	if e.ID == "" {
		e.ID = NewErrorID()
	}
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	typ := e.Type
	if typ == "" {
		typ = APIError
	}
	if log != nil {
		level := slog.LevelWarn
		if status >= 500 {
			level = slog.LevelError
		}
		if ctx != nil && ctx.Err() != nil {
			level = slog.LevelDebug
		}
		attrs := []slog.Attr{slog.String("error_id", e.ID), slog.Int("status", status), slog.String("type", typ), slog.String("message", e.Message)}
		if e.Err != nil {
			attrs = append(attrs, slog.String("detail", e.Err.Error()))
		}
		log.LogAttrs(context.Background(), level, "ctxguard error", attrs...)
	}
	if ctx != nil && ctx.Err() != nil {
		return
	}
	msg := e.Message + " (error ID " + e.ID + ")"
	body := AppendErrorJSON(make([]byte, 0, 96+len(msg)+len(e.ID)), typ, msg, e.ID)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Ctxguard-Error-Id", e.ID)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
