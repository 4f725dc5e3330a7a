package compact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// record is a compaction's summary as the store keeps it (under the span's
// name). It is written once and never replaced: every request that
// carries the compaction sends Text, byte for byte.
type record struct {
	// Text is the summary message's text as sent: a note on what was
	// compacted and where the originals are, then the summary.
	Text string `json:"text"`
	// Summary is the summary alone, which a model writing the next
	// compaction's summary reads.
	Summary string `json:"summary"`
	// Facts are the facts of every span summarized so far, as data: the
	// next compaction merges them with its own span's. Records written
	// before facts existed have none; their Summary serves as an earlier
	// summary (previousFacts).
	Facts *facts `json:"facts,omitempty"`
	// Blobs hold the original messages of every span summarized so far,
	// oldest first.
	Blobs []string `json:"blobs"`
	// Messages counts the messages summarized, all compactions included.
	Messages int `json:"messages"`
	// Tokens is the estimate of Text, which the plan counts for it.
	Tokens int `json:"tokens"`
	// Model wrote the summary; InputTokens and OutputTokens are what its
	// call cost (for an extractive summary: what a model call would
	// have cost, for replays to price it). Extractive marks the
	// extractive summary: written without a model, or in place of a
	// model's answer that was empty or over the budget (then Model and
	// the tokens are that call's).
	Model        string `json:"model,omitempty"`
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens"`
	Extractive   bool   `json:"extractive,omitempty"`
}

// Record is what a stored compaction record says, for reports.
type Record struct {
	// Text is the summary message's text as sent (a note on what was
	// compacted and where the originals are, then the summary).
	Text                      string
	Messages                  int
	Tokens                    int
	Model                     string
	InputTokens, OutputTokens int
	Extractive                bool
}

// ReadRecord returns the compaction record stored under key (a store
// key starting "compact/"), for reports and replays.
func ReadRecord(ctx context.Context, st store.Store, key string) (Record, error) {
	b, err := st.Get(ctx, key)
	if err != nil {
		return Record{}, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("compact: record %s: %w", key, err)
	}
	return Record{Text: r.Text, Messages: r.Messages, Tokens: r.Tokens, Model: r.Model, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, Extractive: r.Extractive}, nil
}

// newRecord renders the record of a span's summary: the originals of the
// span go to a blob (those of earlier spans are named again), and the
// span's facts are merged with the earlier spans'. prose is a model's
// summary, which the facts follow as an appendix, or "" for the
// extractive summary. The summary message, its note included, fits in
// in.budget tokens: a model's summary too long for it (with room left for
// the appendix) gives way to the extractive one (the record keeps what
// the call cost).
func (p *Pass) newRecord(ctx context.Context, in *spanInput, prose, model string, inTok, outTok int) *record {
	rec := &record{Model: model, InputTokens: inTok, OutputTokens: outTok, Messages: in.count}
	blob := ""
	if len(in.transcript) > 0 {
		if k, err := p.blobs.Keep(ctx, in.transcript); err == nil {
			blob = k.ID
		} else {
			p.log.Warn("compact: keeping the originals of a summarized span", "err", err)
		}
	}
	f := merge(in.prev, in.cur, blob)
	for _, b := range f.Spans {
		if b != "" {
			rec.Blobs = append(rec.Blobs, b)
		}
	}
	note := p.note(rec.Messages, rec.Blobs)
	budget := summaryBudget(in.budget, note)
	prose = strings.TrimSpace(prose)
	if prose != "" {
		n := tokens.EstimateText(prose)
		if room := budget - n; room >= appendixFloor(f, budget) {
			rec.Summary = prose + "\n\n" + fit(f.notIn(prose), appendix, room)
			f.Earlier, f.EarlierSpans = prose, len(f.Spans)
		} else {
			p.log.Warn("compact: the model's summary is over its budget; the extractive summary serves", "tokens", n, "budget", budget)
		}
	}
	if rec.Summary == "" {
		rec.Summary = fit(f, whole, budget)
		rec.Extractive = true
	}
	rec.Facts = bounded(f, budget)
	rec.Text = note + "\n\n<summary>\n" + rec.Summary + "\n</summary>"
	rec.Tokens = tokens.EstimateText(rec.Text) + messageTokens
	return rec
}

// messageTokens is what the summary message costs beyond its text (its
// role and block wrapping).
const messageTokens = 8

// note is the line that starts a summary message: how many messages it
// stands for, and where their originals are.
func (p *Pass) note(messages int, ids []string) string {
	blobs := make([]string, len(ids))
	for i, id := range ids {
		blobs[i] = p.blobs.Name(id)
	}
	var where string
	switch len(blobs) {
	case 0:
		where = "The originals could not be kept."
	case 1:
		where = "The original messages are kept word for word in blob " + blobs[0] + ": " + p.blobs.Howto() + "."
	default:
		where = "The original messages are kept word for word, oldest first, in blob " + strings.Join(blobs, ", blob ") + ": " + p.blobs.Howto() + "."
	}
	return fmt.Sprintf(conversation.CompactionNote+"%d messages of this conversation into the summary below, to keep the session inside the model's context window. %s]", messages, where)
}

// summaryBudget is what the summary itself may take of a message of
// budget tokens that starts with note. The estimate of joined texts can
// differ from the sum of theirs by a token at each join: a few tokens
// are kept for that.
func summaryBudget(budget int, note string) int {
	return max(budget-tokens.EstimateText(note+"\n\n<summary>\n\n</summary>")-messageTokens-4, model.SummaryBudgetMin/2)
}

// appendixFloor is the least a model's summary must leave of the budget
// for the appendix: the appendix whole, up to a quarter of the budget.
func appendixFloor(f *facts, budget int) int {
	return min(tokens.EstimateText(f.render(appendix)), budget/4)
}

// previousFacts returns what the record rec (nil: none) holds for the
// next compaction to merge: its facts, or for a record written before
// facts existed, its summary as an earlier summary of all its spans.
func previousFacts(rec *record) *facts {
	switch {
	case rec == nil:
		return &facts{}
	case rec.Facts != nil:
		return rec.Facts
	}
	return &facts{Spans: slices.Clone(rec.Blobs), Earlier: rec.Summary, EarlierSpans: len(rec.Blobs)}
}

// put stores rec under key unless a record is there already, and returns
// the record that is stored: the first one written wins (atomically, for
// every process on the store), so every request and every process sends
// the same summary.
func (p *Pass) put(ctx context.Context, key string, rec *record) (*record, error) {
	got, err := p.records.Decide(ctx, key, rec)
	if err != nil {
		return nil, fmt.Errorf("compact: storing a summary: %w", err)
	}
	return got, nil
}

// get returns the record under key, nil when there is none.
func (p *Pass) get(ctx context.Context, key string) (*record, error) {
	r, ok, err := p.records.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("compact: reading a summary: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return r, nil
}

// activation returns the request (its message count) that first carried
// the summary under key, or 0 when none did yet.
func (p *Pass) activation(ctx context.Context, key string) (int, error) {
	n, _, err := p.acts.Get(ctx, key+"/at")
	if err != nil {
		return 0, fmt.Errorf("compact: reading a summary's activation: %w", err)
	}
	return n, nil
}

// activate records that request at is the first to carry the summary
// under key, unless one is recorded already, and returns the recorded
// one. Like records, an activation is written once.
func (p *Pass) activate(ctx context.Context, key string, at int) (int, error) {
	n, err := p.acts.Decide(ctx, key+"/at", at)
	if err != nil {
		return 0, fmt.Errorf("compact: storing a summary's activation: %w", err)
	}
	return n, nil
}

// initRecords sets up the caches of records and activations over the
// store; both are decided once (store.Decisions).
func (p *Pass) initRecords() {
	st := p.blobs.Store
	every := store.RefreshInterval(p.blobs.TTL)
	p.records = store.Decisions[*record]{Store: st, Max: 1024, Refresh: every, Now: p.now,
		Encode: func(r *record) ([]byte, error) { return json.Marshal(r) },
		Decode: func(b []byte) (*record, error) {
			var r record
			if err := json.Unmarshal(b, &r); err != nil || r.Text == "" || r.Tokens <= 0 {
				// A record that does not decode is not ours to use.
				return nil, errors.New("the stored summary does not decode")
			}
			return &r, nil
		}}
	p.acts = store.Decisions[int]{Store: st, Max: 1024, Refresh: every, Now: p.now,
		Encode: func(n int) ([]byte, error) { return strconv.AppendInt(nil, int64(n), 10), nil },
		Decode: func(b []byte) (int, error) {
			n, err := strconv.Atoi(string(b))
			if err != nil || n <= 0 {
				return 0, errors.New("the stored activation does not decode")
			}
			return n, nil
		}}
}
