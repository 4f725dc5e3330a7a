// Package conversation is the protocol-neutral view of one model request:
// an ordered list of messages, each an ordered list of blocks (text, tool
// call, tool result, thinking, image, opaque), every one of them located by
// byte spans in the original request body.
//
// A Conversation never owns or copies the body it describes: spans index
// into Conversation.Body, which the caller must keep unchanged for as long
// as the Conversation is used. A Conversation is immutable once a protocol
// adapter (package anthropic, for example) has built it and is safe for
// concurrent reads.
package conversation

import (
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

func (k Kind) String() string {
	return [...]string{"opaque", "text", "tool_call", "tool_result", "thinking", "redacted_thinking", "image", "document"}[k]
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

	release func()
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

	Text      Span // text, thinking: the JSON string holding the text
	Signature Span // thinking: the signature string; redacted_thinking: data

	// Tool calls and results. ID is the JSON string holding the call id
	// (tool_use id, or the id a result answers); Name the JSON string
	// holding the tool's name (for a result, the name of the matching
	// call). Call locates the call a result answers: message and block
	// index, or {-1, -1} when none matched.
	ID    Span
	Name  Span
	Call  [2]int
	Input Span // tool call input value

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
