package tokens

import (
	"encoding/binary"
	"math"
	"unsafe"
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
// API's downscaling. Non-positive sizes give 0.
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
	return int(math.Ceil(math.Floor(w) * math.Floor(h) / imagePixelsPer))
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
	return payloadTokens(b64)
}

type kind uint8

const (
	kindNone kind = iota
	kindPNG
	kindGIF
	kindWebP
	kindJPEG
	kindPDF
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

// payloadTokens bills base64 data that is an image or a PDF; ok is false
// for anything else.
func payloadTokens(b64 []byte) (int, bool) {
	var h [32]byte
	n := decodeAt(b64, 0, h[:])
	k := imageKind(h[:n])
	size := len(b64) / 4 * 3
	switch k {
	case kindNone:
		return 0, false
	case kindPDF:
		return max(pdfMinTokens, size/pdfBytesPerToken), true
	}
	if w, hh, ok := dimensions(k, b64, h[:n]); ok {
		return ImageTokens(w, hh), true
	}
	return min(max(size/imageBytesPerToken, imageMinTokens), ImageMaxPixels/imagePixelsPer), true
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
