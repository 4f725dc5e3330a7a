package compress

import (
	"github.com/ctxguard/ctxguard/internal/stub"

	"strings"
	"unicode/utf8"
)

// Elements counted as evidence that a text is HTML.
var htmlElements = map[string]bool{
	"html": true, "head": true, "body": true, "title": true, "meta": true, "link": true,
	"script": true, "style": true, "div": true, "span": true, "p": true, "a": true,
	"ul": true, "ol": true, "li": true, "dl": true, "dt": true, "dd": true,
	"table": true, "thead": true, "tbody": true, "tfoot": true, "tr": true, "td": true, "th": true,
	"section": true, "article": true, "main": true, "nav": true, "header": true, "footer": true,
	"aside": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"img": true, "form": true, "input": true, "button": true, "label": true, "select": true,
	"option": true, "br": true, "hr": true, "pre": true, "code": true, "em": true,
	"strong": true, "b": true, "i": true, "small": true, "blockquote": true, "figure": true,
	"figcaption": true, "iframe": true, "noscript": true, "center": true, "font": true,
}

// Elements a fragment may start with. script and style are left out: a
// text that starts with them is more likely a component file (Vue, Svelte)
// than a page.
var htmlStarts = map[string]bool{
	"head": true, "body": true, "div": true, "span": true, "p": true, "a": true, "ul": true,
	"ol": true, "table": true, "section": true, "article": true, "main": true, "nav": true,
	"header": true, "footer": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true,
	"h6": true, "form": true, "center": true, "font": true, "meta": true, "link": true, "title": true,
}

const minHTMLTags = 8

// tagName returns the lower-cased name of the tag starting at s[0] == '<'
// ("/div" counts as "div") and whether there is one.
func tagName(s string) (string, bool) {
	if s == "" || s[0] != '<' {
		return "", false
	}
	i := 1
	if i < len(s) && s[i] == '/' {
		i++
	}
	j := i
	for j < len(s) && j-i < 12 && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
		j++
	}
	if j == i || j >= len(s) {
		return "", false
	}
	if c := s[j]; c != '>' && c != ' ' && c != '/' && c != '\t' && c != '\n' && c != '\r' {
		return "", false
	}
	return strings.ToLower(s[i:j]), true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// looksHTML reports whether s as a whole is an HTML document or fragment:
// after white space (and an XML prolog) it starts with <!DOCTYPE html,
// <html or a common element, it ends with '>', it holds at least
// minHTMLTags tags of common elements, and it has no template syntax
// ({{ or {%), which marks a source file rather than a served page.
func looksHTML(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n\ufeff")
	if !strings.HasSuffix(strings.TrimRight(t, " \t\r\n"), ">") {
		return false
	}
	if hasPrefixFold(t, "<?xml") {
		if i := strings.Index(t, "?>"); i >= 0 {
			t = strings.TrimLeft(t[i+2:], " \t\r\n")
		}
	}
	switch {
	case hasPrefixFold(t, "<!doctype html"), hasPrefixFold(t, "<html"):
	default:
		name, ok := tagName(t)
		if !ok || !htmlStarts[name] {
			return false
		}
	}
	if strings.Contains(t, "{{") || strings.Contains(t, "{%") {
		return false
	}
	n := 0
	for i := 0; n < minHTMLTags; {
		j := strings.IndexByte(t[i:], '<')
		if j < 0 {
			return false
		}
		i += j
		if name, ok := tagName(t[i:]); ok && htmlElements[name] {
			n++
		}
		i++
	}
	return true
}

// reduceHTML converts s to Markdown, or strips script and style contents
// when Markdown is off, if s is an HTML document within the size limits.
// It returns s itself otherwise.
func (p *Pass) reduceHTML(s string) string {
	c := &p.cfg.HTML
	if len(s) < c.MinChars || !looksHTML(s) {
		return s
	}
	n := utf8.RuneCountInString(s)
	if n < c.MinChars || (c.MaxChars > 0 && n > c.MaxChars) {
		return s
	}
	if p.html == nil {
		return stripScripts(s)
	}
	key := memoKey(s)
	if out, ok := p.memo.get(key); ok {
		return out
	}
	md, err := p.html.ConvertString(s)
	if err != nil {
		return s // not cached: an error is not a result
	}
	out := "[ctxguard converted " + stub.Commas(n) + " chars of HTML to Markdown; scripts and styles removed]\n\n" + strings.TrimSpace(md) + "\n"
	if len(out) >= len(s) || utf8.RuneCountInString(out) > n {
		return s // no saving: leave the page as it is
	}
	p.memo.put(key, out)
	return out
}

// stripScripts replaces the content of each <script> and <style> element
// with a marker, keeping the tags and their attributes.
func stripScripts(s string) string {
	var b strings.Builder
	last := 0
	lower := asciiLower(s) // same length and offsets as s
	for i := 0; ; {
		j := strings.IndexByte(lower[i:], '<')
		if j < 0 {
			break
		}
		i += j
		var name string
		switch {
		case strings.HasPrefix(lower[i:], "<script"):
			name = "script"
		case strings.HasPrefix(lower[i:], "<style"):
			name = "style"
		default:
			i++
			continue
		}
		after := i + 1 + len(name)
		if after >= len(s) || !(lower[after] == '>' || lower[after] == ' ' || lower[after] == '\t' || lower[after] == '\n' || lower[after] == '\r') {
			i++
			continue
		}
		open := strings.IndexByte(lower[after:], '>')
		if open < 0 {
			break
		}
		bodyStart := after + open + 1
		close := strings.Index(lower[bodyStart:], "</"+name)
		if close < 0 {
			break
		}
		bodyEnd := bodyStart + close
		content := s[bodyStart:bodyEnd]
		if strings.TrimSpace(content) != "" {
			runes := utf8.RuneCountInString(content)
			marker := "[... ctxguard removed " + stub.Commas(runes) + " chars of " + name + " ...]"
			if len(marker) < len(content) && len(marker) <= runes {
				if b.Len() == 0 {
					b.Grow(len(s))
				}
				b.WriteString(s[last:bodyStart])
				b.WriteString(marker)
				last = bodyEnd
			}
		}
		i = bodyEnd
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// asciiLower lower-cases ASCII letters only, so offsets stay those of s.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
