// Package conversation is the protocol-neutral view of one model request:
// an ordered list of messages, each an ordered list of blocks (text, tool
// call, tool result, thinking, image, opaque), every one of them located by
// byte spans in the original request body.
//
// A message is a turn of one side, not always one JSON object: a protocol
// adapter may make one message of several wire items (the Responses API's
// reasoning, function_call and message items of one assistant turn; the
// tool messages answering one Chat Completions assistant message), so that
// every protocol has the same shape: an assistant message's tool calls are
// answered by the tool results of the next message. What is protocol
// specific in writing new bytes is the Dialect's.
//
// A Conversation never owns or copies the body it describes: spans index
// into Conversation.Body, which the caller must keep unchanged for as long
// as the Conversation is used. A Conversation is immutable once a protocol
// adapter (package anthropic, for example) has built it and is safe for
// concurrent reads.
package conversation

import (
	"strconv"
	"unsafe"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Span is a half-open byte range in Conversation.Body.
type Span = jsonscan.Span

// Role is who wrote a message.
type Role uint8

const (
	RoleOther Role = iota
	RoleUser
	RoleAssistant
	RoleSystem    // a system message inside the message list
	RoleDeveloper // OpenAI's developer role
	RoleTool      // OpenAI's tool role
)

func (r Role) String() string {
	switch r {
	case RoleUser:
		return "user"
	case RoleAssistant:
		return "assistant"
	case RoleSystem:
		return "system"
	case RoleDeveloper:
		return "developer"
	case RoleTool:
		return "tool"
	}
	return "other"
}

// Kind is what a block is.
type Kind uint8

const (
	Opaque Kind = iota // a block type ctxguard does not interpret; never edited
	Text
	ToolCall
	ToolResult
	Thinking
	RedactedThinking
	Image
	Document
)

var kindNames = [...]string{"opaque", "text", "tool_call", "tool_result", "thinking", "redacted_thinking", "image", "document"}

// String returns the kind's name, or "kind(N)" for a value no kind has.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Conversation is one request's messages, found as byte spans.
type Conversation struct {
	Body  []byte // the original request body (not owned, not modified)
	Root  Span   // the top-level object
	Model string // the model named by the request, decoded

	System   Span // the top-level system value, if any
	Tools    Span // the top-level tools array, if any
	List     Span // the messages array
	Messages []Message

	Stream bool // the request asked for a streamed answer

	// CacheMarkers counts cache_control markers in system, tools and
	// messages, including those inside tool results.
	CacheMarkers int

	// Top-level members by name, for passes that add or change request
	// settings. Absent members have zero spans.
	Thinking          Member
	ContextManagement Member
	Metadata          Member

	// Continued is set when the request continues a conversation the
	// server keeps (the Responses API's previous_response_id): Messages
	// hold only the new turns, so there is no history to edit.
	Continued bool

	// Dialect renders, in the protocol's bytes, what passes ask for. It
	// is set by the adapter that built the Conversation.
	Dialect Dialect

	release func()
}

// Dialect is what a protocol adapter knows about writing new bytes into a
// request of its protocol: the shapes of a text block, a cache marker and
// a rewritten message, and the request settings a rewrite needs. Passes
// use it so that they never write protocol bytes themselves. A Dialect is
// stateless and safe for concurrent use.
type Dialect interface {
	// AppendText appends a content block of the protocol holding the JSON
	// string quoted (quotes included, as sent), for a block of a message
	// of role r (RoleTool: a part of a tool result). extra, if not empty,
	// is more object members (key through value) to put in the block.
	AppendText(dst []byte, r Role, quoted, extra []byte) []byte
	// KeptBlock returns the bytes block b of message m keeps when the
	// message is rewritten whole (ReplaceMessage): its own bytes, or a
	// normalized form (a text block without its cache marker, say), or
	// nil when the block cannot stay without the tool calls and results
	// that are dropped (the Responses API's reasoning items, the Messages
	// API's whitespace-only text).
	KeptBlock(c *Conversation, m *Message, b *Block) []byte
	// ReplaceMessage returns the span to replace and the bytes that make
	// message mi hold exactly blocks (each from KeptBlock or AppendText),
	// in the message's own role.
	ReplaceMessage(c *Conversation, mi int, blocks [][]byte) (Span, []byte)
	// CacheMarker returns the object member that marks a cache
	// breakpoint on a block (the client's own, copied, when it has one),
	// or nil when the protocol has none: OpenAI caches prefixes by itself.
	CacheMarker(c *Conversation) []byte
	// Settings returns the edits to the body (Span, replacement) and the
	// header values to add (name, value) that ask the API for the
	// settings s. Settings a request already states are left as they are;
	// a protocol without such a setting returns nothing.
	Settings(c *Conversation, s Settings) (edits []SettingEdit, headers [][2]string)
	// Image describes the image block or part at sp; ok is false for
	// anything that is not a well-formed image of the protocol.
	Image(c *Conversation, sp Span) (img ImageInfo, ok bool)
	// SessionID returns a session id the request's body carries (Claude
	// Code's metadata.user_id, the Responses prompt_cache_key), or "".
	SessionID(c *Conversation) string
}

// Unsigner is implemented by Dialects whose signatures ride on blocks
// that stand without them: Gemini's thoughtSignature on a functionCall,
// text or other part, which the part keeps when its token is not the
// target model's. The thinking guard unsigns such a block instead of
// removing it (a call removed would break its pairing).
type Unsigner interface {
	// Unsign returns how block b of c (one with a Signature) stops
	// carrying a token a model of the family target (model.Family) would
	// refuse: the span to edit and its new bytes, or a nil repl when the
	// span is an object member (key through value) to remove. ok is false
	// for a block that does not stand without its token (a thought),
	// which the guard removes whole.
	Unsign(c *Conversation, b *Block, target string) (sp Span, repl []byte, ok bool)
}

// ImageInfo is what a Dialect reads of an image block.
type ImageInfo struct {
	Inline bool   // the image data is in the block (base64)
	Media  string // media type, e.g. "image/png"; "" when not stated
	Base64 int    // characters of the inline base64 data, padding excluded
	URL    string // where the image is, when it is not inline (bounded)
	// Keep is the block's members a replacement must keep (its cache
	// marker, key through value), or zero.
	Keep Span
}

// Settings are request-level settings a rewrite may need.
type Settings uint8

const (
	// DropInvalidThinking asks a model that binds thinking blocks to
	// their prefix to drop, rather than reject, a block whose prefix was
	// edited.
	DropInvalidThinking Settings = 1 << iota
)

// SettingEdit is one change of the body a setting needs: the bytes at
// Span become Repl (an empty Span inserts).
type SettingEdit struct {
	Span Span
	Repl []byte
}

// OnRelease sets what Release does; adapters use it to take back the
// memory a Conversation holds.
func (c *Conversation) OnRelease(f func()) { c.release = f }

// Release hands the Conversation's memory back to the adapter that built
// it, for the next request. Neither the Conversation nor any slice taken
// from it (Messages, Blocks, Parts) may be used afterwards. Calling it is
// optional; a Conversation never released is collected as usual.
func (c *Conversation) Release() {
	if f := c.release; f != nil {
		c.release = nil
		f()
	}
}

// Member is a top-level key/value pair. Whole spans from the key's opening
// quote to the value's end, so a pass can replace or delete the pair.
type Member struct {
	Whole Span
	Value Span
}

// Message is one entry of the message list.
type Message struct {
	Role    Role
	Span    Span // the whole message object
	Content Span // the content value
	// ContentString is set when Content is a bare JSON string; then Blocks
	// holds one Text block whose Span and Text are that string.
	ContentString bool
	Blocks        []Block
}

// Block is one content block.
type Block struct {
	Kind Kind
	Type string // the wire "type" as sent (decoded)
	Span Span   // the block object (or the string, for string content)

	Text Span // text, thinking: the JSON string holding the text
	// Signature is the opaque token an API minted for the block, a JSON
	// string, set only where there is one: a thinking block's signature, a
	// redacted_thinking block's data, and a Responses reasoning item's
	// encrypted_content (the item stays Opaque).
	Signature Span

	// Tool calls and results. ID is the JSON string holding the call id
	// (tool_use id, or the id a result answers); Name the JSON string
	// holding the tool's name (for a result, the name of the matching
	// call). Call locates the call a result answers: message and block
	// index, or {-1, -1} when none matched.
	ID    Span
	Name  Span
	Call  [2]int
	Input Span // tool call input value
	// InputEncoded is set when Input is a JSON string holding the input
	// as encoded JSON (OpenAI's "arguments"), not the input itself.
	InputEncoded bool

	Content Span   // tool result content value (string or array)
	Parts   []Part // tool result content, located
	IsError bool

	// CacheControl is the "cache_control" member of the block (key through
	// value), if present.
	CacheControl Span
}

// Part is one piece of a tool result's content.
type Part struct {
	Kind Kind // Text, Image, Document or Opaque
	Span Span // the part's block object, or the string for string content
	Text Span // for Text: the JSON string holding the text
	// CacheControl is the part's "cache_control" member, if present.
	CacheControl Span
}

// LastAssistant returns the index of the last assistant message, or -1.
func (c *Conversation) LastAssistant() int {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == RoleAssistant {
			return i
		}
	}
	return -1
}

// Bytes returns the bytes of s in the body. The result aliases Body.
func (c *Conversation) Bytes(s Span) []byte { return s.Bytes(c.Body) }

// String decodes the JSON string at s, or returns "" if s is absent or not
// a valid string. It allocates; use it off the hot path or for short values.
func (c *Conversation) String(s Span) string {
	if s.IsZero() {
		return ""
	}
	v, err := jsonscan.Unquote(s.Bytes(c.Body))
	if err != nil {
		return ""
	}
	return v
}

// ToolName returns the decoded tool name of a tool call or result block.
func (c *Conversation) ToolName(b *Block) string { return c.String(b.Name) }

// Footprint approximates the bytes the Conversation's own arrays hold
// (messages, blocks, parts), not counting Body.
func (c *Conversation) Footprint() int {
	n := len(c.Messages) * int(unsafe.Sizeof(Message{}))
	for i := range c.Messages {
		n += len(c.Messages[i].Blocks) * int(unsafe.Sizeof(Block{}))
		for j := range c.Messages[i].Blocks {
			n += len(c.Messages[i].Blocks[j].Parts) * int(unsafe.Sizeof(Part{}))
		}
	}
	return n
}
