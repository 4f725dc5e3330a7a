package protocol

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

// Kind is what went wrong, in terms every API has a shape for.
type Kind uint8

const (
	Internal       Kind = iota // 500 and ctxguard's own upstream failures (502, 504)
	InvalidRequest             // 400, 408 and other 4xx
	Authentication             // 401
	Permission                 // 403
	NotFound                   // 404
	TooLarge                   // 413
	RateLimited                // 429
	Overloaded                 // 529 (Anthropic), 503 elsewhere
	GatewayTimeout             // 504
)

// Error is an error that ctxguard itself answers a client with, rendered
// by the request's protocol (Protocol.AppendError).
//
// Message is shown to the client and must be safe to show: it never holds
// request content or credentials. Err is the detail; it goes only to the
// log. ID ties the two together: it is sent in the body and in the
// X-Ctxguard-Error-Id header, and logged with the detail.
type Error struct {
	Status  int    // HTTP status; 0 means 500
	Kind    Kind   // what the client's API calls it
	Message string // safe, client-facing text
	ID      string // error ID; Write assigns one when empty
	Err     error  // detail for the log only; may be nil
	// Header holds headers to send with the answer (Retry-After).
	Header http.Header
}

// Errorf returns an *Error with a client-facing message and a detail
// error.
func Errorf(status int, kind Kind, detail error, format string, args ...any) *Error {
	return &Error{Status: status, Kind: kind, Message: fmt.Sprintf(format, args...), Err: detail}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// NewErrorID returns a fresh, random error ID ("ctxguard_" + 16 hex
// digits).
func NewErrorID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ctxguard_" + hex.EncodeToString(b[:])
}

// AsError converts any error to an *Error, so it can be rendered. An
// *Error anywhere in err's chain is used as it is; a bare error becomes a
// 500 whose detail is err.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Kind: Internal, Message: "ctxguard: internal error", Err: err}
}

// Write is the one place where ctxguard renders its own errors to a
// client. It converts err with AsError, assigns an ID when the error has
// none, logs the ID, status and detail (never headers or bodies), and
// writes the body p renders with the error's status, as application/json
// with X-Content-Type-Options: nosniff. The client sees the safe message
// and the ID, never the detail.
//
// It must be called before anything of the response was written. When
// the client has gone away (ctx done), it only logs, at debug level.
func Write(ctx context.Context, w http.ResponseWriter, log *slog.Logger, p Protocol, err error) *Error {
	e := AsError(err)
	if e.ID == "" {
		e.ID = NewErrorID()
	}
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if sm, ok := p.(StatusMapper); ok {
		status = sm.ErrorStatus(e.Kind, status)
	}
	if log != nil {
		level := slog.LevelWarn
		if status >= 500 {
			level = slog.LevelError
		}
		if ctx != nil && ctx.Err() != nil {
			level = slog.LevelDebug
		}
		attrs := []slog.Attr{slog.String("error_id", e.ID), slog.Int("status", status), slog.String("message", e.Message)}
		if p != nil {
			attrs = append(attrs, slog.String("protocol", p.Name()))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String("detail", e.Err.Error()))
		}
		log.LogAttrs(context.Background(), level, "ctxguard error", attrs...)
	}
	if ctx != nil && ctx.Err() != nil {
		return e
	}
	msg := e.Message + " (error ID " + e.ID + ")"
	var body []byte
	if p != nil {
		body = p.AppendError(make([]byte, 0, 128+len(msg)), e.Kind, msg, e.ID)
	} else {
		body = AppendPlainError(nil, msg, e.ID)
	}
	h := w.Header()
	for k, vs := range e.Header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Ctxguard-Error-Id", e.ID)
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return e
}

// StatusMapper is implemented by protocols whose API answers a kind of
// error with another status than ctxguard's default (Error.Status): the
// OpenAI APIs say overloaded with 503, not Anthropic's 529.
type StatusMapper interface {
	ErrorStatus(k Kind, status int) int
}

// AppendPlainError appends an error body for a request no protocol
// claimed: {"error":{"message":...,"id":...}}.
func AppendPlainError(dst []byte, message, id string) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = jsonscan.AppendQuote(dst, message)
	dst = append(dst, `,"id":`...)
	dst = jsonscan.AppendQuote(dst, id)
	return append(dst, "}}"...)
}
