package replay

import "github.com/ctxguard/ctxguard/transcript"

// Stream rebuilds the requests a session's client sent, oldest first.
func Stream(s *transcript.Session, opt transcript.BuildOptions) ([]Request, error) {
	b, err := transcript.NewBuilder(s, opt)
	if err != nil {
		return nil, err
	}
	out := make([]Request, 0, b.Len())
	for k := 0; k < b.Len(); k++ {
		r, err := b.Request(k)
		if err != nil {
			return nil, err
		}
		out = append(out, Request{Body: r.Body, Reset: r.Reset})
	}
	return out, nil
}
