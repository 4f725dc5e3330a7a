package tokens

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Image billing. Anthropic bills an image at about width*height/750 tokens
// after scaling it down so that its long edge is at most 1568 pixels and
// it has at most about 1.2 megapixels (about 1,600 tokens).
const (
	ImageMaxEdge   = 1568
	ImageMaxPixels = 1_200_000
	imagePixelsPer = 750
	// Without readable dimensions an image is estimated from its size:
	// one token per 200 decoded bytes, between 50 and 1,600.
	imageBytesPerToken = 200
	imageMinTokens     = 50
	// A PDF costs its text and an image of every page; without parsing it
	// we bill one token per 12 decoded bytes, at least 1,500.
	pdfBytesPerToken = 12
	pdfMinTokens     = 1500
)

// ImageTokens returns the tokens of a width x height image after the
// API's downscaling, at least 1. Non-positive sizes give 0.
func ImageTokens(width, height int) int {
	if width <= 0 || height <= 0 {
		return 0
	}
	w, h := float64(width), float64(height)
	s := math.Min(1, float64(ImageMaxEdge)/math.Max(w, h))
	w, h = w*s, h*s
	if px := w * h; px > ImageMaxPixels {
		s = math.Sqrt(ImageMaxPixels / px)
		w, h = w*s, h*s
	}
	return max(1, int(math.Ceil(math.Floor(w)*math.Floor(h)/imagePixelsPer)))
}

// ImageDataTokens estimates the tokens of a base64-encoded image (the
// "data" of an image source, without quotes). It reads the dimensions of
// PNG, JPEG, GIF and WebP data from their headers; for other data, or a
// header it cannot read, it estimates from the size. ok is false if data
// is not an image format it knows.
func ImageDataTokens(b64 []byte) (tokens int, ok bool) {
	var head [32]byte
	n := decodeAt(b64, 0, head[:])
	if k := imageKind(head[:n]); k == kindNone || k == kindPDF {
		return 0, false
	}
	return payloadTokens(b64, kindNone)
}

type kind uint8

const (
	kindNone kind = iota
	kindPNG
	kindGIF
	kindWebP
	kindJPEG
	kindPDF
	// kindImage is an image whose format its media type states and whose
	// header cannot be read: billed from its size.
	kindImage
)

func imageKind(h []byte) kind {
	switch {
	case len(h) >= 8 && string(h[:8]) == "\x89PNG\r\n\x1a\n":
		return kindPNG
	case len(h) >= 6 && (string(h[:6]) == "GIF87a" || string(h[:6]) == "GIF89a"):
		return kindGIF
	case len(h) >= 12 && string(h[:4]) == "RIFF" && string(h[8:12]) == "WEBP":
		return kindWebP
	case len(h) >= 3 && h[0] == 0xFF && h[1] == 0xD8 && h[2] == 0xFF:
		return kindJPEG
	case len(h) >= 5 && string(h[:5]) == "%PDF-":
		return kindPDF
	}
	return kindNone
}

// mediaKind is what a media type says: kindImage for image/*, kindPDF
// for application/pdf, kindNone for anything else.
func mediaKind(media []byte) kind {
	switch {
	case len(media) > len("image/") && bytes.EqualFold(media[:len("image/")], []byte("image/")):
		return kindImage
	case bytes.EqualFold(media, []byte("application/pdf")):
		return kindPDF
	}
	return kindNone
}

// payloadTokens bills base64 data that is an image or a PDF: the kind its
// header shows, else the kind stated for it (by its media type; kindNone
// when nothing states one). ok is false when neither says image or PDF.
// The data may be damaged (a marker in it, a bad length, stray
// characters): a header that decodes gives the dimensions, and otherwise
// the image is billed from the data's length, within the API's cap.
func payloadTokens(b64 []byte, stated kind) (int, bool) {
	var h [32]byte
	n := decodeAt(b64, 0, h[:])
	k := dataKind(h[:n], stated)
	size := len(b64) / 4 * 3
	switch k {
	case kindNone:
		return 0, false
	case kindPDF:
		return max(pdfMinTokens, size/pdfBytesPerToken), true
	}
	if w, hh, ok := dimensions(k, b64, h[:n]); ok && w > 0 && hh > 0 {
		return ImageTokens(w, hh), true
	}
	if k == kindJPEG || k == kindPNG || k == kindImage {
		if w, hh, ok := frameSize(b64); ok {
			return ImageTokens(w, hh), true
		}
	}
	return min(max(size/imageBytesPerToken, imageMinTokens), ImageMaxPixels/imagePixelsPer), true
}

// dataKind is the kind of data whose decoded head is h: the kind the head
// shows, else the kind stated for it.
func dataKind(h []byte, stated kind) kind {
	if k := imageKind(h); k != kindNone {
		return k
	}
	return stated
}

// maxLookBack bounds how far before a run of base64 the estimator looks
// for the quote that opens the string holding it: a damaged head (a
// scrubber's marker, stray characters) puts the first long run a little
// way into the string.
const maxLookBack = 4096

// imageData decides whether the long run of base64 alphabet raw[r0:r1] is
// image or PDF data, and if so returns the data's span raw[p0:p1] (p0 <=
// r0, p1 >= r1) and its tokens. The run is data when the string that
// holds it (from the nearest '"' before the run, escaped or not, looked
// for back to lo and at most maxLookBack bytes) is:
//
//   - a base64 data URL from its start ("data:<media type>[;...];base64,"):
//     the data follows the comma; image/* and application/pdf state the
//     kind (OpenAI's input_image and image_url parts, file data);
//   - the "data" member of an object whose "media_type" member, before or
//     after it, is image/* or application/pdf (Anthropic's base64 image
//     and document sources, in tool results too), stating the kind;
//   - or, when the run starts the string, data whose decoded head is a
//     PNG, JPEG, GIF, WebP or PDF header.
//
// A stated kind bills the data as an image (or a PDF) whether or not it
// decodes: a head it cannot read bills it from its size. Stated or read,
// the data runs from its start to the next '"' (a backslash escaping
// that quote excluded), whatever it holds on the way (markers, stray
// characters, a length that is not a multiple of 4), unless more than one
// byte in 16 of it, beyond 8, is outside the base64 alphabet: then what
// follows the run is text, and the data ends with the run. A run right
// after ";base64," inside other text (a data URL in HTML or Markdown) is
// data to its own end when its head is an image or PDF header.
func imageData(raw []byte, lo, r0, r1 int) (p0, p1, tok int, ok bool) {
	from := max(lo, r0-maxLookBack)
	if q := bytes.LastIndexByte(raw[from:r0], '"'); q >= 0 {
		q += from
		c, stated, quote := q+1, kindNone, -1
		if d, k, isURL := dataURL(raw[:r0], c); isURL {
			c, stated = d, k
		} else if key := dataKey(raw, from, q); key >= 0 {
			if stated = mediaBefore(raw, max(from, key-mediaReach), key); stated == kindNone {
				quote = quoteAfter(raw, r1)
				stated = mediaAfter(raw, quote)
			}
		}
		var h [32]byte
		if (c == r0 || stated != kindNone) && dataKind(h[:decodeAt(raw[c:r1], 0, h[:])], stated) != kindNone {
			if quote < 0 {
				quote = quoteAfter(raw, r1)
			}
			end := dataEnd(raw, c, r0, r1, quote)
			tok, _ := payloadTokens(raw[c:end], stated)
			return c, end, tok, true
		}
	}
	if bytes.HasSuffix(raw[:r0], []byte(";base64,")) {
		if tok, ok := payloadTokens(raw[r0:r1], kindNone); ok {
			return r0, r1, tok, true
		}
	}
	return r0, r1, 0, false
}

// dataURL reads a base64 data URL at raw[c:] ("data:image/png;base64,"):
// the offset of its data and the kind its media type states. ok is false
// when raw[c:] does not start one.
func dataURL(raw []byte, c int) (data int, k kind, ok bool) {
	const scheme = "data:"
	if !bytes.HasPrefix(raw[c:], []byte(scheme)) {
		return 0, kindNone, false
	}
	head := raw[c+len(scheme) : min(len(raw), c+len(scheme)+128)]
	comma := bytes.IndexByte(head, ',')
	if comma < 0 || !bytes.HasSuffix(head[:comma], []byte(";base64")) {
		return 0, kindNone, false
	}
	media, _, _ := bytes.Cut(head[:comma], []byte{';'})
	return c + len(scheme) + comma + 1, mediaKind(media), true
}

const (
	dataMember  = `"data"`
	mediaMember = `"media_type"`
	// mediaReach is how far from the "data" member its object's
	// "media_type" is looked for.
	mediaReach = 256
)

// dataKey returns where the key "data" starts when the string opening at
// raw[q] is its value ("data":"...), looking no further back than from,
// else -1.
func dataKey(raw []byte, from, q int) int {
	j := spaceBefore(raw, from, q)
	if j <= from || raw[j-1] != ':' {
		return -1
	}
	j = spaceBefore(raw, from, j-1)
	if j-from < len(dataMember) || string(raw[j-len(dataMember):j]) != dataMember {
		return -1
	}
	return j - len(dataMember)
}

// mediaBefore returns the kind stated by the last "media_type" member in
// raw[from:key] when nothing between it and key leaves the object.
func mediaBefore(raw []byte, from, key int) kind {
	m := bytes.LastIndex(raw[from:key], []byte(mediaMember))
	if m < 0 {
		return kindNone
	}
	k, end := mediaValue(raw[:key], from+m)
	if k == kindNone || bytes.ContainsAny(raw[end:key], "{}") {
		return kindNone
	}
	return k
}

// mediaAfter returns the kind stated by the first "media_type" member
// within mediaReach bytes after the string that closes at raw[quote]
// when nothing between them leaves the object.
func mediaAfter(raw []byte, quote int) kind {
	if quote >= len(raw) {
		return kindNone
	}
	after := raw[quote+1 : min(len(raw), quote+1+mediaReach)]
	m := bytes.Index(after, []byte(mediaMember))
	if m < 0 || bytes.ContainsAny(after[:m], "{}") {
		return kindNone
	}
	k, _ := mediaValue(raw, quote+1+m)
	return k
}

// mediaValue reads the member "media_type": "<value>" at raw[m:]: the kind
// its value states and where the value ends.
func mediaValue(raw []byte, m int) (kind, int) {
	v := jsonscan.SkipSpace(raw, m+len(mediaMember))
	if v == len(raw) || raw[v] != ':' {
		return kindNone, v
	}
	v = jsonscan.SkipSpace(raw, v+1)
	if v == len(raw) || raw[v] != '"' {
		return kindNone, v
	}
	e := bytes.IndexByte(raw[v+1:min(len(raw), v+1+mediaReach)], '"')
	if e < 0 {
		return kindNone, v
	}
	return mediaKind(raw[v+1 : v+1+e]), v + 2 + e
}

// spaceBefore returns i moved back over JSON whitespace, not before from.
func spaceBefore(raw []byte, from, i int) int {
	for i > from && jsonscan.SkipSpace(raw[:i], i-1) == i {
		i--
	}
	return i
}

// quoteAfter returns the index of the first '"' at or after i, or
// len(raw).
func quoteAfter(raw []byte, i int) int {
	if k := bytes.IndexByte(raw[i:], '"'); k >= 0 {
		return i + k
	}
	return len(raw)
}

// dataEnd returns where data that starts at c, holds the run raw[r0:r1]
// and is followed by the quote at raw[quote] (or the end) ends, as
// imageData states it.
func dataEnd(raw []byte, c, r0, r1, quote int) int {
	end := quote
	if end > r1 && raw[end-1] == '\\' {
		end--
	}
	if end == r1 && c == r0 {
		return r1
	}
	n := 0
	for _, x := range raw[c:r0] {
		if !base64Alphabet[x] {
			n++
		}
	}
	for _, x := range raw[r1:end] {
		if !base64Alphabet[x] {
			n++
		}
	}
	if n > (end-c)/16+8 {
		return r1
	}
	return end
}

// dimensions reads width and height from an image header.
func dimensions(k kind, b64, h []byte) (int, int, bool) {
	switch k {
	case kindPNG:
		if len(h) >= 24 && string(h[12:16]) == "IHDR" {
			return int(binary.BigEndian.Uint32(h[16:])), int(binary.BigEndian.Uint32(h[20:])), true
		}
	case kindGIF:
		if len(h) >= 10 {
			return int(binary.LittleEndian.Uint16(h[6:])), int(binary.LittleEndian.Uint16(h[8:])), true
		}
	case kindWebP:
		if len(h) < 30 {
			return 0, 0, false
		}
		switch string(h[12:16]) {
		case "VP8 ":
			return int(binary.LittleEndian.Uint16(h[26:]) & 0x3fff), int(binary.LittleEndian.Uint16(h[28:]) & 0x3fff), true
		case "VP8L":
			v := binary.LittleEndian.Uint32(h[21:])
			return int(v&0x3fff) + 1, int(v>>14&0x3fff) + 1, true
		case "VP8X":
			w := int(h[24]) | int(h[25])<<8 | int(h[26])<<16
			hh := int(h[27]) | int(h[28])<<8 | int(h[29])<<16
			return w + 1, hh + 1, true
		}
	case kindJPEG:
		return jpegSize(b64)
	}
	return 0, 0, false
}

// jpegSize walks the JPEG segments (decoding the base64 only where it
// looks) to the first start-of-frame marker, within the first 64 segments.
func jpegSize(b64 []byte) (int, int, bool) {
	var seg [9]byte
	pos := 2
	for range 64 {
		if decodeAt(b64, pos, seg[:4]) < 4 || seg[0] != 0xFF {
			return 0, 0, false
		}
		m := seg[1]
		switch {
		case m == 0xFF: // fill byte
			pos++
			continue
		case m == 0xD8 || m == 0x01 || m >= 0xD0 && m <= 0xD7: // no length
			pos += 2
			continue
		case m == 0xD9 || m == 0xDA: // end of image, start of scan
			return 0, 0, false
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			if decodeAt(b64, pos, seg[:9]) < 9 {
				return 0, 0, false
			}
			h := int(binary.BigEndian.Uint16(seg[5:]))
			w := int(binary.BigEndian.Uint16(seg[7:]))
			return w, h, w > 0 && h > 0
		}
		pos += 2 + int(binary.BigEndian.Uint16(seg[2:]))
	}
	return 0, 0, false
}

// frameReach is how much of damaged image data frameSize searches: a
// JPEG's frame header follows its EXIF segment, at most 64 KB.
const frameReach = 96 << 10

// frameSize finds the dimensions of image data whose header could not be
// read in place (damage in it shifted or broke what follows): every run of
// base64 alphabet in the data's first frameReach bytes is decoded at each
// of the 4 alignments a lost or added character may have left, and
// searched for a JPEG frame header (SOFn with 1, 3 or 4 components of 8 or
// 12 bits) or a PNG IHDR chunk. The largest frame found wins: a camera's
// thumbnail comes before the image's own frame.
func frameSize(b64 []byte) (w, h int, ok bool) {
	const stride, overlap = 4096, 24 // characters: 3,072 bytes, and the 18 a header may cross into the next stride
	b64 = b64[:min(len(b64), frameReach)]
	var buf [(stride + overlap) / 4 * 3]byte
	for i := 0; i < len(b64); {
		j := i
		for j < len(b64) && b64Value[b64[j]] < 0x40 {
			j++
		}
		for phase := 0; phase < 4 && i+phase+16 <= j; phase++ {
			for s := i + phase; s+16 <= j; s += stride {
				chunk := b64[s:min(j, s+stride+overlap)]
				n, _ := base64.StdEncoding.Decode(buf[:], chunk[:len(chunk)/4*4])
				if fw, fh, found := frameIn(buf[:n]); found && fw*fh > w*h {
					w, h, ok = fw, fh, true
				}
			}
		}
		i = j + 1
	}
	return w, h, ok
}

// frameIn finds a JPEG frame header or a PNG IHDR chunk in decoded bytes
// and returns the largest size one of them states.
func frameIn(b []byte) (w, h int, ok bool) {
	for i := 0; i+10 <= len(b); i++ {
		k := bytes.IndexByte(b[i:len(b)-9], 0xFF)
		if k < 0 {
			break
		}
		i += k
		m, n := b[i+1], int(b[i+9])
		if m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC && b[i+2] == 0 &&
			(n == 1 || n == 3 || n == 4) && int(b[i+3]) == 8+3*n && (b[i+4] == 8 || b[i+4] == 12) {
			fh, fw := int(binary.BigEndian.Uint16(b[i+5:])), int(binary.BigEndian.Uint16(b[i+7:]))
			if fw > 0 && fh > 0 && fw*fh > w*h {
				w, h, ok = fw, fh, true
			}
		}
	}
	for i := 0; ; i++ {
		k := bytes.Index(b[i:], []byte("IHDR"))
		if k < 0 || i+k+14 > len(b) {
			break
		}
		i += k
		fw, fh := int(binary.BigEndian.Uint32(b[i+4:])), int(binary.BigEndian.Uint32(b[i+8:]))
		depth, colour := b[i+12], b[i+13]
		valid := depth > 0 && depth <= 16 && depth&(depth-1) == 0 && colour <= 6 && colour != 1 && colour != 5
		if valid && fw > 0 && fh > 0 && fw < 1<<20 && fh < 1<<20 && fw*fh > w*h {
			w, h, ok = fw, fh, true
		}
	}
	return w, h, ok
}

// decodeAt decodes len(dst) bytes of the standard base64 stream b64 from
// decoded offset off. It returns how many it could decode.
func decodeAt(b64 []byte, off int, dst []byte) int {
	n := 0
	for n < len(dst) {
		g := (off + n) / 3
		if 4*g+4 > len(b64) {
			return n
		}
		var v uint32
		avail := 3
		for _, c := range b64[4*g : 4*g+4] {
			d := b64Value[c]
			if d == 0xff {
				return n
			}
			if d == 0x40 { // '=' padding: one byte fewer
				avail--
			}
			v = v<<6 | uint32(d&0x3f)
		}
		grp := [3]byte{byte(v >> 16), byte(v >> 8), byte(v)}
		for j := (off + n) % 3; j < avail && n < len(dst); j++ {
			dst[n] = grp[j]
			n++
		}
		if avail < 3 {
			return n
		}
	}
	return n
}

// b64Value maps the standard base64 alphabet to its values, '=' to 0x40
// (a zero value), and everything else to 0xff.
var b64Value = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	t['='] = 0x40
	return t
}()

func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
