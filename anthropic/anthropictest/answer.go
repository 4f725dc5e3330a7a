package anthropictest

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// answer is a Turn resolved against its request.
type answer struct {
	id, model, stop string
	blocks          []Block
	usage           anthropic.Usage
	ctxMgmt         bool // the request had context_management
	textChunk       int
	jsonChunk       int
}

func (s *Server) answer(rec *Request, t *Turn) *answer {
	a := &answer{id: s.nextID("msg"), model: t.Model, stop: t.StopReason, usage: t.Usage,
		textChunk: s.opts.TextChunk, jsonChunk: s.opts.JSONChunk}
	root, _ := jsonscan.Root(rec.Decoded)
	if a.model == "" {
		if m, err := jsonscan.Lookup(rec.Decoded, root, "model"); err == nil {
			a.model, _ = jsonscan.Unquote(m.Bytes(rec.Decoded))
		}
	}
	if _, err := jsonscan.Lookup(rec.Decoded, root, "context_management"); err == nil {
		a.ctxMgmt = true
	}
	out := 0
	for _, b := range t.Blocks {
		if b.Type == "tool_use" {
			if b.ID == "" {
				b.ID = s.nextID("toolu")
			}
			if b.Input == "" {
				b.Input = "{}"
			}
			if a.stop == "" {
				a.stop = "tool_use"
			}
		}
		out += len(b.Text) + len(b.Input) + len(b.Signature) + len(b.Data)
		a.blocks = append(a.blocks, b)
	}
	if a.stop == "" {
		a.stop = "end_turn"
	}
	if a.usage == (anthropic.Usage{}) {
		a.usage = anthropic.Usage{InputTokens: len(rec.Decoded) / 4, OutputTokens: out/4 + 1}
	}
	return a
}

func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// usageJSON renders a usage object; start adds the message_start extras.
func (a *answer) usageJSON(start bool) string {
	u := a.usage
	if start {
		return fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}`,
			u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens)
	}
	return fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d}`,
		u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens)
}

func blockJSON(b Block) string {
	switch b.Type {
	case "text":
		return `{"type":"text","text":` + q(b.Text) + `}`
	case "tool_use":
		return `{"type":"tool_use","id":` + q(b.ID) + `,"name":` + q(b.Name) + `,"input":` + b.Input + `}`
	case "thinking":
		return `{"type":"thinking","thinking":` + q(b.Text) + `,"signature":` + q(b.Signature) + `}`
	case "redacted_thinking":
		return `{"type":"redacted_thinking","data":` + q(b.Data) + `}`
	}
	return `{"type":` + q(b.Type) + `}`
}

// json renders the non-streamed answer.
func (a *answer) json() []byte {
	var b strings.Builder
	b.WriteString(`{"model":` + q(a.model) + `,"id":` + q(a.id) + `,"type":"message","role":"assistant","content":[`)
	for i, bl := range a.blocks {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(blockJSON(bl))
	}
	b.WriteString(`],"stop_reason":` + q(a.stop) + `,"stop_sequence":null,"usage":` + a.usageJSON(false))
	if a.ctxMgmt {
		b.WriteString(`,"context_management":{"applied_edits":[]}`)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// events renders the streamed answer as SSE events (each "event: ...\ndata: ...\n\n").
func (a *answer) events(ping bool) []string {
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	var out []string
	out = append(out, ev("message_start", `{"type":"message_start","message":{"model":`+q(a.model)+`,"id":`+q(a.id)+
		`,"type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":`+a.usageJSON(true)+`}}`))
	if ping {
		out = append(out, ev("ping", `{"type": "ping"}`))
	}
	for i, bl := range a.blocks {
		idx := strconv.Itoa(i)
		delta := func(d string) {
			out = append(out, ev("content_block_delta", `{"type":"content_block_delta","index":`+idx+`,"delta":`+d+`}`))
		}
		switch bl.Type {
		case "text":
			out = append(out, ev("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"text","text":""}}`))
			for _, c := range chunks(bl.Text, a.textChunk) {
				delta(`{"type":"text_delta","text":` + q(c) + `}`)
			}
		case "tool_use":
			out = append(out, ev("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"tool_use","id":`+q(bl.ID)+`,"name":`+q(bl.Name)+`,"input":{}}}`))
			delta(`{"type":"input_json_delta","partial_json":""}`)
			for _, c := range chunks(bl.Input, a.jsonChunk) {
				delta(`{"type":"input_json_delta","partial_json":` + q(c) + `}`)
			}
		case "thinking":
			out = append(out, ev("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"thinking","thinking":"","signature":""}}`))
			for _, c := range chunks(bl.Text, a.textChunk) {
				delta(`{"type":"thinking_delta","thinking":` + q(c) + `}`)
			}
			delta(`{"type":"signature_delta","signature":` + q(bl.Signature) + `}`)
		default:
			out = append(out, ev("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":`+blockJSON(bl)+`}`))
		}
		out = append(out, ev("content_block_stop", `{"type":"content_block_stop","index":`+idx+`}`))
	}
	md := `{"type":"message_delta","delta":{"stop_reason":` + q(a.stop) + `,"stop_sequence":null},"usage":` + a.usageJSON(false)
	if a.ctxMgmt {
		md += `,"context_management":{"applied_edits":[]}`
	}
	out = append(out, ev("message_delta", md+`}`))
	out = append(out, ev("message_stop", `{"type":"message_stop"}`))
	return out
}

// chunks splits s into pieces of at most n bytes, never inside a UTF-8
// sequence. An empty s gives no chunks.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && k > 0 && s[k]&0xC0 == 0x80 {
			k--
		}
		if k == 0 {
			k = min(n, len(s))
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// Events renders t's streamed answer as the list of SSE events the Server
// would send for req (useful for benchmarks that replay a stream).
func (s *Server) Events(req *Request, t Turn) []string {
	return s.answer(req, &t).events(t.Ping)
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, t *Turn, a *answer) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	var out io.Writer = w
	var enc encoderFlusher
	if t.ContentEncoding != "" {
		h.Set("Content-Encoding", t.ContentEncoding)
		enc = encoder(t.ContentEncoding, w)
		out = enc
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	events := a.events(t.Ping)
	if t.Error != nil {
		n := max(t.ErrorAfter, 0)
		if n > len(events) {
			n = len(events)
		}
		events = append(events[:n:n], "event: error\ndata: "+`{"type":"error","error":{"type":`+q(t.Error.Type)+`,"message":`+q(t.Error.Message)+`}}`+"\n\n")
	}
	for i, e := range events {
		if i > 0 && t.EventDelay > 0 && !sleep(r.Context(), t.EventDelay) {
			return
		}
		if t.Hook != nil {
			t.Hook(i + 1)
		}
		if r.Context().Err() != nil {
			return
		}
		parts := []string{e}
		if t.ChunkSize > 0 {
			parts = chunks(e, t.ChunkSize)
		}
		for _, p := range parts {
			if _, err := io.WriteString(out, p); err != nil {
				return
			}
			if enc != nil {
				if err := enc.Flush(); err != nil {
					return
				}
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
	if enc != nil {
		_ = enc.Close()
		_ = rc.Flush()
	}
}

type encoderFlusher interface {
	io.WriteCloser
	Flush() error
	Reset(io.Writer)
}

func encoder(name string, w io.Writer) encoderFlusher {
	switch name {
	case "gzip":
		return gzip.NewWriter(w)
	case "br":
		return brotli.NewWriter(w)
	case "zstd":
		e, _ := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		return e
	case "deflate":
		return zlib.NewWriter(w)
	}
	panic("anthropictest: unknown content encoding " + name)
}

// Compress returns body compressed with the named content encoding
// ("gzip", "br", "zstd" or "deflate").
func Compress(name string, body []byte) []byte {
	var buf bytes.Buffer
	e := encoder(name, &buf)
	_, _ = e.Write(body)
	_ = e.Close()
	return buf.Bytes()
}

// decode undoes a Content-Encoding, returning body itself when there is
// none or decoding fails.
func decode(enc string, body []byte) []byte {
	var r io.Reader
	var err error
	src := bytes.NewReader(body)
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "":
		return body
	case "gzip", "x-gzip":
		r, err = gzip.NewReader(src)
	case "br":
		r = brotli.NewReader(src)
	case "zstd":
		var d *zstd.Decoder
		d, err = zstd.NewReader(src, zstd.WithDecoderConcurrency(1))
		if err == nil {
			defer d.Close()
			r = d
		}
	case "deflate":
		r, err = zlib.NewReader(src)
	default:
		return body
	}
	if err != nil {
		return body
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return body
	}
	return out
}
