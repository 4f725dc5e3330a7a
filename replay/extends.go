package replay

// Extends reports whether request body b extends request body a as the
// prompt cache sees them: b's prompt, read in the API's order (tools,
// system, then every block of every message), starts with all of a's,
// after the same normalization the cost model uses (cache_control members
// are ignored, and a message sent as a plain string equals one text block
// holding the same string bytes). So the client's moving cache marker and
// its string re-encoding of its previous last message do not count as
// changes; any other byte that differs in a's blocks does.
//
// A rewritten request that does not extend the previous rewritten request
// of its session is an edit event (see Session). Top-level members other
// than tools, system and messages (model, thinking, metadata, ...) are not
// compared. The error is a parse error of a or b.
func Extends(a, b []byte) (bool, error) {
	pa, err := linearize(a)
	if err != nil {
		return false, err
	}
	pb, err := linearize(b)
	if err != nil {
		return false, err
	}
	_, ok := sharedTokens(pa, pb)
	return ok, nil
}
