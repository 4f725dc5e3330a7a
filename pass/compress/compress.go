package compress

import (
	"bytes"
	"fmt"
	"path"
	"strings"
	"unsafe"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
)

// Name is the pass name reported by (*Pass).Name.
const Name = "compress"

// Pass is the compiled compress pass. It implements pipeline.Pass. One
// Pass serves any number of concurrent requests. Its only mutable state is
// a bounded memo of HTML conversions (html.cache_bytes), which saves CPU
// but never changes an output: every result is a pure function of the
// request and the Config.
type Pass struct {
	cfg   Config
	off   bool     // nothing can ever change
	def   settings // for tools no rule matches
	rules []rule
	exact []glob
	html  *converter.Converter // nil unless HTML → Markdown is on
	memo  *htmlMemo            // nil when html.cache_bytes is 0
}

var _ pipeline.Pass = (*Pass)(nil)

// settings are the effective rules for one tool.
type settings struct {
	skip      bool // no rule applies
	text      bool // a rule may change text parts
	ansi      bool
	cr        bool
	base64    bool
	bare      bool
	html      bool
	snapshot  bool
	images    bool
	exact     bool
	maxChars  int
	maxCols   int
	headLines int
}

type rule struct {
	g   glob
	set settings
}

// glob is a compiled path.Match pattern with literal prefix and suffix
// checks that reject most names without running the matcher.
type glob struct {
	pat            string
	literal        bool
	prefix, suffix string
}

func compileGlob(p string) glob {
	i := strings.IndexAny(p, `*?[\`)
	if i < 0 {
		return glob{pat: p, literal: true}
	}
	g := glob{pat: p, prefix: p[:i]}
	if !strings.ContainsAny(p, `[\`) {
		g.suffix = p[strings.LastIndexAny(p, "*?")+1:]
	}
	return g
}

func (g *glob) match(name string) bool {
	if g.literal {
		return name == g.pat
	}
	if !strings.HasPrefix(name, g.prefix) || !strings.HasSuffix(name, g.suffix) {
		return false
	}
	ok, _ := path.Match(g.pat, name)
	return ok
}

// New validates cfg and compiles it. The Pass keeps its own copy of cfg.
func New(cfg Config) (*Pass, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	cfg.ExactTools = append([]string(nil), cfg.ExactTools...)
	cfg.Tools = append([]ToolRule(nil), cfg.Tools...)
	p := &Pass{cfg: cfg}
	p.def = settings{
		ansi:     cfg.ANSI.Enabled,
		cr:       cfg.CarriageReturns.Enabled,
		base64:   cfg.Base64.Enabled,
		bare:     cfg.Base64.Enabled && cfg.Base64.Bare,
		html:     cfg.HTML.Enabled,
		snapshot: cfg.Snapshot.Enabled,
		images:   cfg.Images.Replace,
	}
	if cfg.Cap.Enabled {
		p.def.maxChars = cfg.Cap.MaxChars
	}
	if cfg.LineClip.Enabled {
		p.def.maxCols = cfg.LineClip.MaxColumns
	}
	if cfg.HeadLines.Enabled {
		p.def.headLines = cfg.HeadLines.MaxLines
	}
	p.def.finish()
	for _, r := range cfg.Tools {
		s := p.def
		set := func(dst *bool, v *bool, on bool) {
			if v != nil {
				*dst = *v && on
			}
		}
		set(&s.ansi, r.ANSI, cfg.ANSI.Enabled)
		set(&s.cr, r.CarriageReturns, cfg.CarriageReturns.Enabled)
		set(&s.base64, r.Base64, cfg.Base64.Enabled)
		s.bare = s.base64 && cfg.Base64.Bare
		set(&s.html, r.HTML, cfg.HTML.Enabled)
		set(&s.snapshot, r.Snapshot, cfg.Snapshot.Enabled)
		set(&s.images, r.Images, true)
		if r.MaxChars != nil && cfg.Cap.Enabled {
			s.maxChars = *r.MaxChars
		}
		if r.MaxColumns != nil && cfg.LineClip.Enabled {
			s.maxCols = *r.MaxColumns
		}
		if r.HeadLines != nil && cfg.HeadLines.Enabled {
			s.headLines = *r.HeadLines
		}
		if r.Skip {
			s = settings{}
		}
		s.finish()
		p.rules = append(p.rules, rule{g: compileGlob(r.Match), set: s})
	}
	for _, e := range cfg.ExactTools {
		p.exact = append(p.exact, compileGlob(e))
	}
	if cfg.HTML.Enabled && cfg.HTML.Markdown {
		p.html = converter.NewConverter(converter.WithPlugins(
			base.NewBasePlugin(),
			commonmark.NewCommonmarkPlugin(),
			table.NewTablePlugin(),
		))
		p.memo = newHTMLMemo(cfg.HTML.CacheBytes)
	}
	p.off = !cfg.Enabled
	return p, nil
}

// finish sets text and skip from the rules that are on.
func (s *settings) finish() {
	s.text = s.ansi || s.cr || s.base64 || s.html || s.snapshot ||
		s.maxChars > 0 || s.maxCols > 0 || s.headLines > 0
	s.skip = !s.text && !s.images
}

// exactly returns s restricted to what exact tools get: the cap and image
// replacement.
func (s settings) exactly() settings {
	e := settings{exact: true, maxChars: s.maxChars, images: s.images}
	e.finish()
	return e
}

// Name returns "compress".
func (p *Pass) Name() string { return Name }

// Config returns a copy of the configuration the pass was compiled from.
func (p *Pass) Config() Config {
	c := p.cfg
	c.ExactTools = append([]string(nil), c.ExactTools...)
	c.Tools = append([]ToolRule(nil), c.Tools...)
	return c
}

// resolve returns the settings for a tool name.
func (p *Pass) resolve(name string) settings {
	s := p.def
	for i := range p.rules {
		if p.rules[i].g.match(name) {
			s = p.rules[i].set
			break
		}
	}
	for i := range p.exact {
		if p.exact[i].match(name) {
			return s.exactly()
		}
	}
	return s
}

// toolMemo remembers the settings of the tool names one Run has met, keyed
// by the raw bytes of the name; requests name few distinct tools. It lives
// on Run's stack.
type toolMemo struct {
	n    int
	keys [24][]byte
	sets [24]settings
}

func (p *Pass) settingsFor(body []byte, name conversation.Span, m *toolMemo) (settings, string) {
	var raw []byte
	if name.Len() >= 2 {
		raw = body[name.Start+1 : name.End-1]
	}
	var tool string
	if bytes.IndexByte(raw, '\\') >= 0 {
		t, err := jsonscan.Unquote(name.Bytes(body))
		if err == nil {
			tool = t
		}
	} else if len(raw) > 0 {
		// The body is immutable while the request is processed, so the
		// name can alias it; the string never outlives Run.
		tool = unsafe.String(&raw[0], len(raw))
	}
	for i := 0; i < m.n; i++ {
		if bytes.Equal(m.keys[i], raw) {
			return m.sets[i], tool
		}
	}
	s := p.resolve(tool)
	if m.n < len(m.keys) {
		m.keys[m.n], m.sets[m.n] = raw, s
		m.n++
	}
	return s, tool
}

// PerMessage tells the pipeline that a result's rewrite depends on that
// result alone, so earlier edits of unchanged messages can be reused.
func (p *Pass) PerMessage() {}

// Run returns one edit per tool result text the rules shorten, replacing
// the JSON string literal of Part.Text (quotes included) with
// jsonscan.AppendQuote of the new text, and one per image part replaced
// when images.replace is on, replacing Part.Span. Results already edited
// by an earlier pass are left alone. It does not modify r; the edits and
// their Repl slices are new and belong to the caller. Its only error is a
// text span that is not a valid string literal (a bug upstream), which
// the pipeline turns into a fail-open. It looks at messages from r.From
// on (see pipeline.PerMessage).
func (p *Pass) Run(r *pipeline.Request) ([]splice.Edit, error) {
	if p.off || r == nil || r.Conv == nil {
		return nil, nil
	}
	c := r.Conv
	body := c.Body
	var edits []splice.Edit
	var m toolMemo
	for mi := r.From; mi < len(c.Messages); mi++ {
		msg := &c.Messages[mi]
		for bi := range msg.Blocks {
			b := &msg.Blocks[bi]
			if b.Kind != conversation.ToolResult || len(b.Parts) == 0 {
				continue
			}
			set, tool := p.settingsFor(body, b.Name, &m)
			if set.skip {
				continue
			}
			for pi := range b.Parts {
				pt := &b.Parts[pi]
				switch pt.Kind {
				case conversation.Text:
					if !set.text {
						continue
					}
					e, ok, err := p.textEdit(body, pt.Text, &set, tool)
					if err != nil {
						return nil, err
					}
					if ok && !r.Edited(pt.Text) {
						edits = append(edits, e)
					}
				case conversation.Image:
					if !set.images {
						continue
					}
					if e, ok := imageEdit(r.Conv, pt.Span); ok && !r.Edited(pt.Span) {
						edits = append(edits, e)
					}
				}
			}
		}
	}
	return edits, nil
}

// textEdit decides from the raw literal whether a rule may apply, and only
// then decodes and rewrites it.
func (p *Pass) textEdit(body []byte, sp conversation.Span, set *settings, tool string) (splice.Edit, bool, error) {
	lit := sp.Bytes(body)
	if len(lit) < 2 {
		return splice.Edit{}, false, nil
	}
	raw := lit[1 : len(lit)-1]
	if !p.mayChange(raw, set) {
		return splice.Edit{}, false, nil
	}
	s, err := jsonscan.Unquote(lit)
	if err != nil {
		return splice.Edit{}, false, fmt.Errorf("tool result text at %d: %w", sp.Start, err)
	}
	out := p.text(s, set, tool)
	if out == s {
		return splice.Edit{}, false, nil
	}
	repl := jsonscan.AppendQuote(make([]byte, 0, len(out)+len(out)/8+16), out)
	if len(repl) >= len(lit) {
		return splice.Edit{}, false, nil
	}
	return splice.Edit{Span: sp, Repl: repl}, true, nil
}

// Text returns what the pass makes of the decoded text of one tool result
// of the named tool: s itself when no rule shortens it. It is what Run
// writes (re-encoded) for each result it edits.
func (p *Pass) Text(tool, s string) string {
	if p.off {
		return s
	}
	set := p.resolve(tool)
	if set.skip {
		return s
	}
	return p.text(s, &set, tool)
}

const persisted = "<persisted-output>"

// isPersisted reports whether s is one of Claude Code's notices for an
// output it saved to a file; those are left exactly as they are.
func isPersisted(s string) bool {
	return strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), persisted)
}

// persistedRaw is isPersisted on raw JSON string bytes. It may miss a
// notice spelled with \u escapes, which the decoded check then catches.
func persistedRaw(raw []byte) bool {
	i := 0
	for i < len(raw) {
		if raw[i] == ' ' {
			i++
		} else if raw[i] == '\\' && i+1 < len(raw) && (raw[i+1] == 'n' || raw[i+1] == 'r' || raw[i+1] == 't') {
			i += 2
		} else {
			break
		}
	}
	return bytes.HasPrefix(raw[i:], []byte(persisted))
}

// lineGutter reports whether s starts like Claude Code's numbered file
// listing ("     1→...").
func lineGutter(s string) bool {
	i := 0
	for i < len(s) && i < 16 && s[i] == ' ' {
		i++
	}
	d := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i > d && strings.HasPrefix(s[i:], "→")
}

func (p *Pass) text(s string, set *settings, tool string) string {
	if isPersisted(s) {
		return s
	}
	if !set.exact && lineGutter(s) {
		e := set.exactly()
		set = &e
	}
	// Every transform returns its input or a text with fewer bytes and no
	// more characters; step keeps only byte-shorter outputs.
	step := func(out string) {
		if len(out) < len(s) {
			s = out
		}
	}
	if set.ansi {
		step(stripANSI(s))
	}
	if set.cr {
		step(collapseCR(s))
	}
	if set.html {
		step(p.reduceHTML(s))
	}
	if set.base64 {
		step(replaceBase64(s, p.cfg.Base64.MinChars, set.bare))
	}
	if set.snapshot {
		step(cutSnapshot(s, &p.cfg.Snapshot))
	}
	if set.maxCols > 0 {
		step(clipLines(s, set.maxCols))
	}
	if set.headLines > 0 {
		step(headLines(s, set.headLines, tool))
	}
	if set.maxChars > 0 {
		step(capChars(s, set.maxChars, p.cfg.Cap.HeadRatio, tool))
	}
	return s
}

// mayChange reports, from the raw (escaped) bytes of a JSON string, whether
// any rule in set could change its decoded text. It may say yes when no
// rule applies (the text is then decoded for nothing) but never says no
// when one does.
//
// Cost: one walk over the string's backslashes with bytes.IndexByte, plus
// searches anchored on bytes rare in tool output (';', '[', 'V', 'G',
// 'j') only for texts that could hold what they look for. The walk relies on JSON's rules: ESC, CR
// and LF only occur as escapes, and every decoded character comes from at
// least one raw byte, so raw lengths bound decoded ones. Base64 characters
// are never escaped except '/' (as \/), so a base64 run of n characters
// lies within one stretch of at least n raw bytes between other escapes.
func (p *Pass) mayChange(raw []byte, set *settings) bool {
	n := len(raw)
	if persistedRaw(raw) {
		return false
	}
	if set.maxChars > 0 && n > set.maxChars {
		return true
	}
	if set.exact {
		return false
	}
	// masked: a printable ASCII character written as \u00XX could spell
	// any pattern searched for below, so the decoded text must decide.
	maskedMatters := set.html || set.base64 || set.snapshot
	// Stretches long enough to hold a base64 run, where the base64
	// searches look; past len(long) of them, the whole text is searched.
	var long [16][2]int
	nlong, minRun, segStart := 0, p.cfg.Base64.MinChars, 0
	if !set.base64 {
		minRun = n + 1
	}
	endSeg := func(end, next int) int {
		if end-segStart >= minRun {
			if nlong < len(long) {
				long[nlong] = [2]int{segStart, end}
			}
			nlong++
		}
		return next
	}
	newlines, line := 0, 0 // line feeds; longest line
	lineStart := 0
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 || i+j+1 >= n {
			break
		}
		i += j
		switch raw[i+1] {
		case 'n':
			newlines++
			line = max(line, i-lineStart)
			lineStart = i + 2
		case 'r':
			if set.cr && !bytes.HasPrefix(raw[i+2:], []byte(`\n`)) && !hasLFEscape(raw[i+2:]) {
				return true
			}
		case '/':
			i += 2
			continue // part of a stretch
		case 'u':
			if i+6 <= n && raw[i+2] == '0' && raw[i+3] == '0' {
				switch h, l := raw[i+4], raw[i+5]; {
				case h == '1' && (l == 'b' || l == 'B'):
					if set.ansi {
						return true
					}
				case h == '0' && (l == 'd' || l == 'D'):
					if set.cr {
						return true
					}
				case h == '0' && (l == 'a' || l == 'A'):
					newlines++
					line = max(line, i-lineStart)
					lineStart = i + 6
				case h >= '2' && h <= '7':
					if maskedMatters {
						return true
					}
				}
			}
			segStart = endSeg(i, i+6)
			i += 6
			continue
		}
		segStart = endSeg(i, i+2)
		i += 2
	}
	endSeg(n, n)
	line = max(line, n-lineStart)
	return p.mayChangeShape(raw, set, newlines, line, long[:min(nlong, len(long))], nlong > len(long))
}

// mayChangeShape decides, from what mayChange's walk over raw found (its
// line feeds, its longest line, the stretches long enough to hold a
// base64 run, and whether there were more of them than the walk keeps),
// whether a rule may change raw.
func (p *Pass) mayChangeShape(raw []byte, set *settings, newlines, line int, long [][2]int, tooMany bool) bool {
	n := len(raw)
	switch {
	case set.headLines > 0 && newlines+1 > set.headLines:
		return true
	case set.maxCols > 0 && line > set.maxCols:
		return true
	case set.html && n >= p.cfg.HTML.MinChars && startsWithLT(raw):
		return true
	case set.snapshot && n > p.cfg.Snapshot.TriggerChars && indexAnchored(raw, "[ref=", 0):
		return true
	case tooMany:
		return hasDataURI(raw) || set.bare && hasMagic(raw)
	}
	for _, r := range long {
		// A payload and its ";base64," (or a bare run and its signature)
		// lie in one stretch: none of their characters is escaped.
		if seg := raw[r[0]:r[1]]; hasDataURI(seg) || set.bare && hasMagic(seg) {
			return true
		}
	}
	return false
}

func hasLFEscape(b []byte) bool {
	return len(b) >= 6 && b[0] == '\\' && b[1] == 'u' && b[2] == '0' && b[3] == '0' && b[4] == '0' && (b[5] == 'a' || b[5] == 'A')
}

// indexAnchored reports whether pat occurs in b, searching for pat[k] (a
// byte rare in tool output) and comparing around each hit: bytes.Index
// searches for pat[0], which is often a common letter.
func indexAnchored(b []byte, pat string, k int) bool {
	for i := k; i < len(b); {
		j := bytes.IndexByte(b[i:], pat[k])
		if j < 0 {
			return false
		}
		i += j
		if s := i - k; s+len(pat) <= len(b) && string(b[s:s+len(pat)]) == pat {
			return true
		}
		i++
	}
	return false
}

// hasDataURI reports whether raw may hold a base64 data: URI. Without
// masked escapes, the ";base64," of one is written as is.
func hasDataURI(raw []byte) bool { return indexAnchored(raw, ";base64,", 0) }

// hasMagic reports whether raw may hold a bare base64 image or PDF: the
// base64 form of its signature at a place a run can start (not right after
// a base64 character, unless that character ends an escape such as \n).
// Three searches cover the five signatures: 'V' anchors PNG (iVBORw0KGgo)
// and PDF (JVBERi0), 'G' GIF (R0lGOD) and WebP (UklGR), 'j' JPEG (/9j/,
// or \/9j\/ with its slashes escaped).
func hasMagic(raw []byte) bool {
	return anchored(raw, 'V', sig{"iVBORw0KGgo", 1}, sig{"JVBERi0", 1}) ||
		anchored(raw, 'G', sig{"R0lGOD", 3}, sig{"UklGR", 3}) ||
		anchored(raw, 'j', sig{"/9j/", 2}, sig{`\/9j\/`, 3})
}

// sig is a signature and the index of its anchor byte.
type sig struct {
	prefix string
	k      int
}

// anchored looks for a or b, which share the anchor byte, at places a
// base64 run can start.
func anchored(raw []byte, anchor byte, a, b sig) bool {
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], anchor)
		if j < 0 {
			return false
		}
		i += j
		for _, m := range [2]sig{a, b} {
			st := i - m.k
			if st < 0 || st > 0 && isB64(raw[st-1]) && !afterEscape(raw, st) {
				continue // inside a longer run
			}
			if bytes.HasPrefix(raw[st:], []byte(m.prefix)) {
				return true
			}
		}
		i++
	}
	return false
}

// afterEscape reports whether raw[:st] may end with an escape sequence
// (\n, \uXXXX, ...), whose last raw byte is a letter or digit although
// the character it stands for may not be a base64 character.
func afterEscape(raw []byte, st int) bool {
	return st >= 2 && raw[st-2] == '\\' || st >= 6 && raw[st-6] == '\\' && raw[st-5] == 'u'
}

// startsWithLT reports whether raw, after white space (literal or escaped),
// starts with '<' (literal or escaped).
func startsWithLT(raw []byte) bool {
	for i := 0; i < len(raw); {
		switch raw[i] {
		case ' ':
			i++
			continue
		case '<':
			return true
		case '\\':
			if i+1 < len(raw) {
				switch raw[i+1] {
				case 'n', 'r', 't':
					i += 2
					continue
				case 'u':
					// \u003c is '<'; any other \u escape might be white
					// space or a BOM: say yes rather than decode here.
					return true
				}
			}
			return false
		case 0xEF: // UTF-8 BOM
			if i+2 < len(raw) && raw[i+1] == 0xBB && raw[i+2] == 0xBF {
				i += 3
				continue
			}
		}
		return false
	}
	return false
}
