package anthropic

import (
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/protocol"
)

// Error types of the Messages API, as sent in the error object's "type".
const (
	InvalidRequestError = "invalid_request_error" // 400 and other 4xx
	AuthenticationError = "authentication_error"  // 401
	PermissionError     = "permission_error"      // 403
	NotFoundError       = "not_found_error"       // 404
	RequestTooLarge     = "request_too_large"     // 413
	RateLimitError      = "rate_limit_error"      // 429
	APIError            = "api_error"             // 500, and ctxguard's own 502
	TimeoutError        = "timeout_error"         // 504
	OverloadedError     = "overloaded_error"      // 529
)

// errorType is the Messages API's name for each kind of error.
var errorType = [...]string{
	protocol.Internal:       APIError,
	protocol.InvalidRequest: InvalidRequestError,
	protocol.Authentication: AuthenticationError,
	protocol.Permission:     PermissionError,
	protocol.NotFound:       NotFoundError,
	protocol.TooLarge:       RequestTooLarge,
	protocol.RateLimited:    RateLimitError,
	protocol.Overloaded:     OverloadedError,
	protocol.GatewayTimeout: TimeoutError,
}

// ErrorType returns the Messages API's error type for k.
func ErrorType(k protocol.Kind) string {
	if int(k) < len(errorType) && errorType[k] != "" {
		return errorType[k]
	}
	return APIError
}

// AppendErrorJSON appends an API-shaped error body to dst. requestID may be
// empty, in which case request_id is null.
//
//	{"type":"error","error":{"type":"api_error","message":"..."},"request_id":"ctxguard_..."}
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
