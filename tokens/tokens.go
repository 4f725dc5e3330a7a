// Package tokens estimates token counts quickly and deterministically, and
// learns from the usage the API reports how far the estimate is off.
//
// # The estimator
//
// Estimate works on raw bytes: a JSON value as it appears in a request
// body (a block, a message, a whole body) or plain text. Every byte adds
// the weight of its class, read from a table:
//
//	letters A-Z a-z           0.26 tokens (about 4 letters a token)
//	digits                    1.19 (numbers split into short pieces)
//	space                     0.03 (a space usually joins the next word)
//	backslash                 0.83 (JSON escapes: \n, \", \u001b, ...)
//	other ASCII punctuation   0.45 (quotes, braces, operators, ...)
//	raw newline, tab, control 1.08 (as their JSON escape: \ + letter)
//	UTF-8 lead byte           0.64 (a non-ASCII character, continuation bytes are free)
//	lead byte of CJK/Hangul   1.10 (one CJK character is about a token)
//
// (held in the table to 1/128 token), so text is cheap per byte and
// JSON-heavy, digit-heavy or escaped content is dense, which is how the
// API bills it. The weights (except the CJK one, which the data does not
// contain) were fitted on the real Claude Code sessions in
// the shared data's claude-code folder (see TestFitWeights; tools/estimator
// measures the fit against the sessions' usage). They describe the
// tokenizer of the Claude 4.5 models those sessions used; Anthropic's
// model pages say the tokenizer of Claude 4.7 and later counts the same
// text as about 30% more tokens, which a per-model Calibration learns from
// usage.
//
// Base64 payloads are not text. A run of at least 128 bytes of the base64
// alphabet (MinPayload + 1) is looked at where it starts: after "signature":" it is a
// thinking signature, and after "encrypted_content":" the Responses API's
// encrypted reasoning, neither of which is billed as text (0 tokens: the
// real Codex sessions' usage is about 40% of the estimate that counts
// them). Image and PDF data is billed as what it is: when the JSON string
// holding the run is a base64 data URL of an image or PDF (OpenAI's
// input_image and image_url parts), the "data" of an object whose
// "media_type" is one (Anthropic's image and document sources), or starts
// with a PNG, JPEG, GIF, WebP or PDF header, its whole data is an image,
// billed by its pixel size (ImageTokens, about width*height/750 after the
// API's downscaling; from the data's length when no frame header can be
// found), or a PDF, estimated from its size. That holds when the data does
// not decode (a transcript's copy with a secret scrubber's marker in it, a
// bad length, stray characters; see imageData). Any other run (redacted
// thinking, base64 in a tool result) counts as text. Everything is one
// pass over the bytes with a 128 KB table of byte pairs, 64 bytes at a
// time, without allocating (see BenchmarkEstimate1MB and
// TestEstimateAllocs).
package tokens

import (
	"bytes"
	"encoding/binary"
	"math"
)

// Weights are the per-class token weights of the estimator (tokens per
// byte). The package's are DefaultWeights; other sets exist only for
// fitting and tests.
type Weights struct {
	Alpha, Digit, Space, Backslash, Punct, Lead, CJK float64
}

// DefaultWeights are the fitted weights (see the package doc).
var DefaultWeights = Weights{
	Alpha:     0.2570,
	Digit:     1.1850,
	Space:     0.0339,
	Backslash: 0.8258,
	Punct:     0.4487,
	Lead:      0.6435,
	CJK:       1.10,
}

// class is a byte class of the estimator.
type class uint8

const (
	cAlpha class = iota
	cDigit
	cSpace
	cBackslash
	cPunct
	cControl
	cCont // UTF-8 continuation byte: no weight of its own
	cLead
	cCJK
	nClasses
)

func classOf(c byte) class {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return cAlpha
	case c >= '0' && c <= '9':
		return cDigit
	case c == ' ':
		return cSpace
	case c == '\\':
		return cBackslash
	case c < 0x20 || c == 0x7f:
		return cControl
	case c < 0x80:
		return cPunct
	case c < 0xC0:
		return cCont
	case c >= 0xE3 && c <= 0xED: // U+3000..U+DFFF: CJK, kana, Hangul
		return cCJK
	}
	return cLead
}

// isBase64 reports whether c is of the base64 alphabet, standard or
// URL-safe ('-' and '_': the Responses API's encrypted reasoning).
func isBase64(c byte) bool { return base64Alphabet[c] }

// base64Alphabet is isBase64 as a table: payload runs are extended a byte
// at a time, and a Claude Code request holds hundreds of signatures.
var base64Alphabet = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' || c == '-' || c == '_'
	}
	return t
}()

func (w Weights) of(c class) float64 {
	switch c {
	case cAlpha:
		return w.Alpha
	case cDigit:
		return w.Digit
	case cSpace:
		return w.Space
	case cBackslash:
		return w.Backslash
	case cPunct:
		return w.Punct
	case cControl:
		return w.Backslash + w.Alpha
	case cLead:
		return w.Lead
	case cCJK:
		return w.CJK
	}
	return 0
}

const (
	fixShift = 7 // weights are fixed point with 7 fraction bits
	fixOne   = 1 << fixShift
	b64Flag  = 0x8000
	// blockSize is the stride of the base64 detector: a block whose 64
	// bytes are all of the base64 alphabet may belong to a payload.
	blockSize = 64
	// MinPayload is the length from which a run of base64 alphabet is
	// looked at as a possible payload (see the package doc). Every run at
	// least this long contains a whole aligned block.
	MinPayload = 2*blockSize - 1
)

// table holds, for every pair of bytes, the sum of their fixed-point
// weights (at most 2*1.11*128 = 284) with b64Flag added when both are of
// the base64 alphabet, so that the sum over the 32 pairs of a block is
// below 2^20, its low 15 bits the weight and its high bits the count of
// base64 pairs.
type table struct {
	pair [65536]uint16
	one  [256]uint16 // the weight of single bytes (tails), no flag
}

func newTable(w Weights) *table {
	t := &table{}
	for c := range 256 {
		v := uint16(math.Round(w.of(classOf(byte(c))) * fixOne))
		if v > 255 {
			panic("tokens: weight too large")
		}
		t.one[c] = v
	}
	for i := range 65536 {
		a, b := byte(i), byte(i>>8)
		t.pair[i] = t.one[a] + t.one[b]
		if isBase64(a) && isBase64(b) {
			t.pair[i] |= b64Flag
		}
	}
	return t
}

var defaultTable = newTable(DefaultWeights)

// Estimate returns the estimated token count of raw, a JSON value as it
// appears in a request body or plain text. It is deterministic, allocates
// nothing and is safe for concurrent use. Concatenated pieces estimate to
// about the sum of their estimates (rounding, and payload runs cut at a
// boundary, may move it by a few tokens).
func Estimate(raw []byte) int { return defaultTable.estimate(raw) }

func (t *table) word(w uint64) uint32 {
	return uint32(t.pair[uint16(w)]) + uint32(t.pair[uint16(w>>16)]) + uint32(t.pair[uint16(w>>32)]) + uint32(t.pair[uint16(w>>48)])
}

// estimate is Estimate with t's weights.
func (t *table) estimate(raw []byte) int {
	var total, extra int
	lo := 0                 // where the look-back for a payload's string stops
	runStart, runW := -1, 0 // the current run of all-base64 blocks and its weight
	i := 0
	le := binary.LittleEndian
	for {
		for i+blockSize <= len(raw) {
			b := raw[i : i+blockSize : i+blockSize]
			s := t.word(le.Uint64(b[0:])) + t.word(le.Uint64(b[8:])) + t.word(le.Uint64(b[16:])) + t.word(le.Uint64(b[24:])) +
				t.word(le.Uint64(b[32:])) + t.word(le.Uint64(b[40:])) + t.word(le.Uint64(b[48:])) + t.word(le.Uint64(b[56:]))
			w := int(s & (b64Flag - 1))
			if s>>15 == blockSize/2 { // every pair is base64 alphabet
				if runStart < 0 {
					runStart, runW = i, 0
				}
				runW += w
				total += w
				i += blockSize
				continue
			}
			if runStart >= 0 {
				var next int
				total, extra, lo, next = t.payload(raw, lo, runStart, i, runW, total, extra)
				runStart = -1
				if next > i { // the payload covers this block: go on after it
					i = next
					continue
				}
			}
			total += w
			i += blockSize
		}
		if runStart < 0 {
			break
		}
		var next int
		total, extra, lo, next = t.payload(raw, lo, runStart, i, runW, total, extra)
		runStart = -1
		if next <= i {
			break
		}
		i = next
	}
	for ; i < len(raw); i++ {
		total += int(t.one[raw[i]])
	}
	return (total+fixOne/2)>>fixShift + extra
}

// payload takes the payload around the all-base64 blocks raw[rs:re]
// (whose weight is runW) out of the text total, if it is one, and bills
// its tokens instead. Everything before re is in total; next is where
// counting resumes: re, or the payload's end when it reaches past re.
func (t *table) payload(raw []byte, lo, rs, re, runW, total, extra int) (total2, extra2, lo2, next int) {
	p0, p1, tok, ok, lo := payloadSpan(raw, lo, rs, re)
	if !ok {
		return total, extra, lo, re
	}
	total -= runW
	for _, c := range raw[p0:rs] {
		total -= int(t.one[c])
	}
	return total, extra + tok, lo, p1
}

// payloadSpan extends the all-base64 blocks raw[rs:re] to the whole run of
// base64 alphabet around them (not before lo), and decides what it is:
// for a payload that is not text, the bytes it covers, raw[p0:p1] (p0 <=
// rs, p1 >= re; for image and PDF data the data's whole span, see
// imageData), the tokens to bill for them and true. lo2 is where the
// next payload's look-back stops: the end of this payload or of a run
// judged not to be one, so that no byte is looked back at twice.
func payloadSpan(raw []byte, lo, rs, re int) (p0, p1, tok int, ok bool, lo2 int) {
	p0, p1 = rs, re
	for p0 > lo && isBase64(raw[p0-1]) {
		p0--
	}
	for p1 < len(raw) && isBase64(raw[p1]) {
		p1++
	}
	if p1-p0 < MinPayload+1 || p0 == 0 {
		return p0, p1, 0, false, lo
	}
	before := raw[:p0]
	if bytes.HasSuffix(before, []byte(`"signature":"`)) || bytes.HasSuffix(before, []byte(`"encrypted_content":"`)) {
		return p0, p1, 0, true, p1
	}
	if d0, d1, tok, ok := imageData(raw, lo, p0, p1); ok {
		return d0, d1, tok, true, d1
	}
	return p0, p1, 0, false, p1
}

// counts returns, per class, the bytes Estimate bills as text, and the
// tokens it bills for payloads instead: the same decisions made the simple
// way, for fitting and for checking the fast path.
func counts(raw []byte) (c [nClasses]int, extra int) {
	excluded := make([]bool, len(raw))
	lo, runStart := 0, -1
	// flush decides the run that ends at end and returns where the block
	// walk goes on.
	flush := func(end int) int {
		p0, p1, tok, ok, lo2 := payloadSpan(raw, lo, runStart, end)
		runStart, lo = -1, lo2
		if !ok {
			return end
		}
		extra += tok
		for j := p0; j < p1; j++ {
			excluded[j] = true
		}
		return max(end, p1)
	}
	i := 0
	for i+blockSize <= len(raw) || runStart >= 0 {
		if i+blockSize > len(raw) { // a run reaches the last whole block
			if next := flush(i); next > i {
				i = next
				continue
			}
			break
		}
		all := true
		for _, x := range raw[i : i+blockSize] {
			all = all && isBase64(x)
		}
		switch {
		case all:
			if runStart < 0 {
				runStart = i
			}
			i += blockSize
		case runStart >= 0:
			if next := flush(i); next > i {
				i = next
			} else {
				i += blockSize
			}
		default:
			i += blockSize
		}
	}
	for j, x := range raw {
		if !excluded[j] {
			c[classOf(x)]++
		}
	}
	return c, extra
}

// EstimateText is Estimate for a Go string of plain text.
func EstimateText(s string) int {
	return Estimate(unsafeBytes(s))
}

// BaselineChars counts the characters of raw that are billed as text
// (payloads such as signatures and images left out, as Estimate leaves
// them out) and adds 4 per token Estimate bills for payloads, so that the
// characters/4 baseline of the estimator's accuracy report differs from Estimate only in how text is counted.
func BaselineChars(raw []byte) int {
	cnt, extra := counts(raw)
	n := 4 * extra
	for cl, v := range cnt {
		if class(cl) != cCont {
			n += v
		}
	}
	return n
}
