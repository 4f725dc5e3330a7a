package chart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Marks is what ReadMarks reads back from a chart of one session.
type Marks struct {
	// Requests is the number of requests plotted; First the number of
	// the first (Session.First).
	Requests, First int
	// Events, Compactions and ClientCompactions are the numbers of the
	// requests each kind of marker stands at, in drawing order.
	Events, Compactions, ClientCompactions []int
	// Cold are the requests whose event or compaction was made at a
	// cold cache (the dots on their markers).
	Cold []int
	// Line is the overflow line's tokens (0: none); LineDrawn says it is
	// drawn across the plot rather than named in a note above it.
	Line      int
	LineDrawn bool
	// OrigOnTop says the original line is drawn after the sent line and
	// dashed, so it shows where the two are equal.
	OrigOnTop bool
}

// maxMarkElements bounds the elements ReadMarks reads.
const maxMarkElements = 1 << 16

// ReadMarks reads a chart of one session (SessionSVG) back: the requests
// it plots and where its markers and overflow line are. A marker stands
// at a request when its x is the x of that request's point on the sent
// line. It is for tests and tools, and reads untrusted input safely: a
// document it does not understand is an error.
func ReadMarks(svg []byte) (Marks, error) {
	var m Marks
	var xs []string // the sent line's x coordinates, by request
	marks := map[string][]string{}
	sentAt := -1
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for n := 0; ; n++ {
		if n > maxMarkElements {
			return Marks{}, errors.New("chart: too many elements")
		}
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Marks{}, err
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := map[string]string{}
		for _, a := range se.Attr {
			attr[a.Name.Local] = a.Value
		}
		switch class := attr["class"]; {
		case se.Name.Local == "polyline" && class == "sent":
			if xs != nil {
				return Marks{}, errors.New("chart: more than one sent line")
			}
			xs = []string{}
			for _, p := range strings.Fields(attr["points"]) {
				x, _, ok := strings.Cut(p, ",")
				if !ok {
					return Marks{}, errors.New("chart: bad point " + p)
				}
				xs = append(xs, x)
			}
			m.First = 1
			if f, ok := attr["data-first"]; ok {
				if m.First, err = strconv.Atoi(f); err != nil || m.First < 1 {
					return Marks{}, errors.New("chart: bad data-first " + f)
				}
			}
			sentAt = n
		case se.Name.Local == "polyline" && class == "original":
			m.OrigOnTop = sentAt >= 0 && attr["stroke-dasharray"] != ""
		case se.Name.Local == "line" && (class == "event" || class == "compaction" || class == "client-compaction"):
			marks[class] = append(marks[class], attr["x1"])
		case se.Name.Local == "circle" && class == "cold":
			marks[class] = append(marks[class], attr["cx"])
		case class == "overflow":
			if m.Line, err = strconv.Atoi(attr["data-tokens"]); err != nil || m.Line <= 0 {
				return Marks{}, errors.New("chart: bad overflow line " + attr["data-tokens"])
			}
			m.LineDrawn = se.Name.Local == "line"
		}
	}
	if xs == nil {
		return Marks{}, errors.New("chart: no sent line")
	}
	m.Requests = len(xs)
	at := func(class string) ([]int, error) {
		var out []int
		for _, x := range marks[class] {
			i := slices.Index(xs, x)
			if i < 0 {
				return nil, errors.New("chart: a " + class + " marker at x=" + x + " is at no request")
			}
			out = append(out, m.First+i)
		}
		return out, nil
	}
	var err error
	if m.Events, err = at("event"); err != nil {
		return Marks{}, err
	}
	if m.Compactions, err = at("compaction"); err != nil {
		return Marks{}, err
	}
	if m.Cold, err = at("cold"); err != nil {
		return Marks{}, err
	}
	if m.ClientCompactions, err = at("client-compaction"); err != nil {
		return Marks{}, err
	}
	return m, nil
}
