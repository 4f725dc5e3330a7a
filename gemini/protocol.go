package gemini

import (
	"bytes"
	"hash/maphash"
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild"
	"github.com/ctxguard/ctxguard/protocol"
)

// Family is the protocol family of the Gemini API: its requests go to
// one upstream (config upstreams.gemini).
const Family = "gemini"

// Protocol is the Gemini API (POST /v1beta/models/{model}:generateContent
// and :streamGenerateContent, and the same on /v1/). It is a
// protocol.PathBound: the protocol a request is parsed with is
// Protocol.ForPath(path), which knows the model.
var Protocol protocol.Protocol = api{}

// api is the Gemini protocol, bound to one request's model and method
// (ForPath) or to none.
type api struct {
	model  string // from the path; "" when unbound
	stream bool   // the path's method is streamGenerateContent
}

func (api) Name() string   { return "gemini" }
func (api) Family() string { return Family }

// versions are the API's version path segments.
var versions = []string{"/v1beta/", "/v1/", "/v1alpha/"}

// SplitPath reads a model method path, /v1beta/models/{model}:{method}
// (or /v1/, /v1alpha/): ok is false for any other path.
func SplitPath(path string) (model, method string, ok bool) {
	for _, v := range versions {
		rest, found := strings.CutPrefix(path, v+"models/")
		if !found {
			continue
		}
		model, method, ok = strings.Cut(rest, ":")
		if !ok || model == "" || method == "" || strings.ContainsRune(model, '/') || strings.ContainsRune(method, '/') {
			return "", "", false
		}
		return model, method, true
	}
	return "", "", false
}

// Claim implements protocol.Protocol: a model method path, and anything
// under /v1beta/ or /v1alpha/ (files, cachedContents, model lists), are
// the API's own, as is any request carrying x-goog-api-key or
// x-goog-api-client (every Google SDK sends the second).
func (api) Claim(method, path string, h http.Header) protocol.Claim {
	if _, _, ok := SplitPath(path); ok {
		return protocol.Yes
	}
	for _, v := range []string{"/v1beta/", "/v1alpha/", "/upload/v1beta/"} {
		if strings.HasPrefix(path, v) {
			return protocol.Yes
		}
	}
	if h.Get("X-Goog-Api-Key") != "" || h.Get("X-Goog-Api-Client") != "" {
		return protocol.Yes
	}
	return protocol.No
}

// Rewritable implements protocol.Protocol: POST to a model's
// generateContent or streamGenerateContent (with any query, such as
// ?alt=sse). countTokens and everything else go upstream untouched.
func (api) Rewritable(method, path string) bool {
	_, m, ok := SplitPath(path)
	return ok && method == http.MethodPost && (m == "generateContent" || m == "streamGenerateContent")
}

// ForPath implements protocol.PathBound: the protocol for a request to
// path, whose Parse sets the model and Stream from it.
func (api) ForPath(path string) protocol.Protocol {
	model, method, ok := SplitPath(path)
	if !ok {
		return api{}
	}
	return api{model: model, stream: method == "streamGenerateContent"}
}

func (a api) Parse(body []byte) (*conversation.Conversation, error) { return a.bind(Parse(body)) }

func (a api) ParseAfter(body []byte, prev *conversation.Conversation, stable int) (*conversation.Conversation, error) {
	return a.bind(ParseAfter(body, prev, stable))
}

// bind sets what the path says in a fresh parse.
func (a api) bind(c *conversation.Conversation, err error) (*conversation.Conversation, error) {
	if err != nil {
		return nil, err
	}
	if a.model != "" {
		c.Model = a.model
	}
	c.Stream = c.Stream || a.stream
	return c, nil
}

func (api) Stable(prev *conversation.Conversation, body []byte) int { return Stable(prev, body) }

// QuickKey implements protocol.Protocol: the contents up to the first
// user content, by their parts' text (convbuild.QuickKeyOf). The Gemini
// CLI's first content, its session context, is the same on every
// request of a session.
func (api) QuickKey(seed maphash.Seed, body []byte) (uint64, bool) {
	return convbuild.QuickKeyOf(seed, body, "", "contents", "parts")
}

// Features implements protocol.Protocol: the client's own compaction of
// its history goes upstream as it came: the Gemini CLI's (CLICompaction)
// and Claude Code's, for gateways that translate it
// (convbuild.ClientCompaction).
func (api) Features(_ http.Header, c *conversation.Conversation) protocol.Features {
	return protocol.Features{ClientCompaction: CLICompaction(c) || convbuild.ClientCompaction(c)}
}

// snapshotTag is what the Gemini CLI's compression request names in its
// system instruction ("You are a specialized system component
// responsible for distilling chat history into a structured XML
// <state_snapshot>.") and in the user text that ends it ("First, reason
// in your scratchpad. Then, generate the updated <state_snapshot>.", and
// the verification request's "Critically evaluate the <state_snapshot>
// you just generated. ..."), as sent (no '<': an encoder may escape it).
var snapshotTag = []byte("state_snapshot>")

// CLICompaction reports whether c is the Gemini CLI's compression of its
// own history (its ChatCompressionService, and the verification request
// after it): the system instruction and the last content's text both
// name the <state_snapshot> the CLI asks for.
func CLICompaction(c *conversation.Conversation) bool {
	if len(c.Messages) == 0 || !bytes.Contains(c.Bytes(c.System), snapshotTag) {
		return false
	}
	last := &c.Messages[len(c.Messages)-1]
	if last.Role != conversation.RoleUser {
		return false
	}
	for bi := range last.Blocks {
		if b := &last.Blocks[bi]; b.Kind == conversation.Text && bytes.Contains(c.Bytes(b.Text), snapshotTag) {
			return true
		}
	}
	return false
}

func (api) NewUsageTap(contentType string) protocol.UsageTap { return NewUsageTap(contentType) }

func (api) AppendError(dst []byte, k protocol.Kind, message, id string) []byte {
	return AppendError(dst, k, message, id)
}

// ErrorStatus implements protocol.StatusMapper (ErrorStatus).
func (api) ErrorStatus(k protocol.Kind, status int) int { return ErrorStatus(k, status) }

// Overflow implements protocol.OverflowReader (Overflow).
func (api) Overflow(status int, body []byte) (protocol.Overflow, bool) { return Overflow(status, body) }
