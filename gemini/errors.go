package gemini

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/protocol"
)

// errorStatus is the API's HTTP status and google.rpc status name for
// each kind of error.
var errorStatus = [...]struct {
	code   int
	status string
}{
	protocol.Internal:       {http.StatusInternalServerError, "INTERNAL"},
	protocol.InvalidRequest: {http.StatusBadRequest, "INVALID_ARGUMENT"},
	protocol.Authentication: {http.StatusUnauthorized, "UNAUTHENTICATED"},
	protocol.Permission:     {http.StatusForbidden, "PERMISSION_DENIED"},
	protocol.NotFound:       {http.StatusNotFound, "NOT_FOUND"},
	protocol.TooLarge:       {http.StatusRequestEntityTooLarge, "INVALID_ARGUMENT"},
	protocol.RateLimited:    {http.StatusTooManyRequests, "RESOURCE_EXHAUSTED"},
	protocol.Overloaded:     {http.StatusServiceUnavailable, "UNAVAILABLE"},
	protocol.GatewayTimeout: {http.StatusGatewayTimeout, "DEADLINE_EXCEEDED"},
}

func statusOf(k protocol.Kind) (int, string) {
	if int(k) < len(errorStatus) && errorStatus[k].status != "" {
		return errorStatus[k].code, errorStatus[k].status
	}
	return errorStatus[protocol.Internal].code, errorStatus[protocol.Internal].status
}

// AppendError appends an error body in the Gemini API's shape (a
// google.rpc.Status), with the error ID as a member of its own:
//
//	{"error":{"code":400,"message":"...","status":"INVALID_ARGUMENT","ctxguard_error_id":"ctxguard_..."}}
func AppendError(dst []byte, k protocol.Kind, message, id string) []byte {
	code, status := statusOf(k)
	dst = append(dst, `{"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = jsonscan.AppendQuote(dst, message)
	dst = append(dst, `,"status":`...)
	dst = jsonscan.AppendQuote(dst, status)
	dst = append(dst, `,"ctxguard_error_id":`...)
	dst = jsonscan.AppendQuote(dst, id)
	return append(dst, "}}"...)
}

// ErrorStatus is the status the API answers an error of kind k with,
// where it differs from ctxguard's default: 503 for overloaded.
func ErrorStatus(k protocol.Kind, status int) int {
	if k == protocol.Overloaded {
		return http.StatusServiceUnavailable
	}
	return status
}

// Overflow reads an error answer of the Gemini API: a 400
// INVALID_ARGUMENT whose message says the prompt is over the model's
// limit, "The input token count (1250000) exceeds the maximum number of
// tokens allowed (1048576)." (older models: "... allowed 1048576."),
// with its numbers. The error of a JSON-array stream
// (streamGenerateContent without alt=sse) comes as an array of one.
func Overflow(status int, body []byte) (protocol.Overflow, bool) {
	if status != http.StatusBadRequest {
		return protocol.Overflow{}, false
	}
	type answer struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	var e answer
	if json.Unmarshal(body, &e) != nil {
		var arr []answer
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 {
			return protocol.Overflow{}, false
		}
		e = arr[0]
	}
	if e.Error.Status != "" && e.Error.Status != "INVALID_ARGUMENT" {
		return protocol.Overflow{}, false
	}
	m := overflowRE.FindStringSubmatch(e.Error.Message)
	if m == nil {
		return protocol.Overflow{}, false
	}
	var o protocol.Overflow
	o.Tokens, _ = strconv.Atoi(m[1])
	o.Limit, _ = strconv.Atoi(m[2])
	return o, true
}

var overflowRE = regexp.MustCompile(`input token count \(?(\d*)\)? ?exceeds the maximum number of tokens allowed \(?(\d*)\)?`)
