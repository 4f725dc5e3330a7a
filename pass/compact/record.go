package compact

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ctxguard/ctxguard/conversation"
	"strconv"
	"strings"
	"sync"

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
	// Summary is the summary alone, folded into the next compaction's.
	Summary string `json:"summary"`
	// Blobs hold the original messages of every span summarized so far,
	// oldest first.
	Blobs []string `json:"blobs"`
	// Messages counts the messages summarized, all compactions included.
	Messages int `json:"messages"`
	// Tokens is the estimate of Text, which the plan counts for it.
	Tokens int `json:"tokens"`
	// Model wrote the summary; InputTokens and OutputTokens are what its
	// call cost (for an extractive summary: what a model call would
	// have cost, for replays to price it). Extractive marks a summary
	// written without a model.
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
func ReadRecord(st store.Store, key string) (Record, error) {
	b, err := st.Get(key)
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
// span go to a blob (those of earlier spans are named again).
func (p *Pass) newRecord(in *spanInput, summary, model string, inTok, outTok int) *record {
	rec := &record{Summary: strings.TrimSpace(summary), Model: model, InputTokens: inTok, OutputTokens: outTok, Messages: in.count}
	rec.Blobs = append(rec.Blobs, in.prevBlobs...)
	var where string
	if len(in.transcript) > 0 {
		if k, err := p.blobs.Keep(in.transcript); err == nil {
			rec.Blobs = append(rec.Blobs, k.ID)
		} else {
			p.log.Warn("compact: keeping the originals of a summarized span", "err", err)
		}
	}
	switch len(rec.Blobs) {
	case 0:
		where = "The originals could not be kept."
	case 1:
		where = "The original messages are kept word for word in blob " + rec.Blobs[0] + ": " + p.blobs.Howto() + "."
	default:
		where = "The original messages are kept word for word, oldest first, in blob " + strings.Join(rec.Blobs, ", blob ") + ": " + p.blobs.Howto() + "."
	}
	rec.Text = fmt.Sprintf(conversation.CompactionNote+"%d messages of this conversation into the summary below, to keep the session inside the model's context window. %s]\n\n<summary>\n%s\n</summary>", rec.Messages, where, rec.Summary)
	rec.Tokens = tokens.EstimateText(rec.Text) + 8
	return rec
}

// put stores rec under key unless a record is there already, and returns
// the record that is stored: the first one written wins, so every request
// and every process sends the same summary. Within a process it is
// atomic; across processes on one store the first Put wins for a reader
// that reads after both (see store.Store).
func (p *Pass) put(key string, rec *record) (*record, error) {
	p.records.mu.Lock()
	defer p.records.mu.Unlock()
	if got, err := p.records.getLocked(p.blobs.Store, key); err != nil || got != nil {
		return got, err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := p.blobs.Store.Put(key, b); err != nil {
		return nil, fmt.Errorf("compact: storing a summary: %w", err)
	}
	p.records.addLocked(key, rec)
	return rec, nil
}

// recordCache keeps decoded records in memory, bounded in count. Records
// never change once written, so a cached one is always right.
type recordCache struct {
	mu  sync.Mutex
	max int
	m   map[string]*record
	act map[string]int // activations read or written
}

func (c *recordCache) init(max int) { c.max, c.m, c.act = max, map[string]*record{}, map[string]int{} }

// activation returns the request (its message count) that first carried
// the summary under key, or 0 when none did yet.
func (c *recordCache) activation(st store.Store, key string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.activationLocked(st, key)
}

func (c *recordCache) activationLocked(st store.Store, key string) (int, error) {
	if n := c.act[key]; n > 0 {
		return n, nil
	}
	b, err := st.Get(key + "/at")
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("compact: reading a summary's activation: %w", err)
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("compact: the activation of %s does not decode", key)
	}
	if len(c.act) >= c.max {
		clear(c.act)
	}
	c.act[key] = n
	return n, nil
}

// activate records that request at is the first to carry the summary
// under key, unless one is recorded already, and returns the recorded
// one. Like records, an activation is written once.
func (c *recordCache) activate(st store.Store, key string, at int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, err := c.activationLocked(st, key); err != nil || n > 0 {
		return n, err
	}
	if err := st.Put(key+"/at", []byte(strconv.Itoa(at))); err != nil {
		return 0, fmt.Errorf("compact: storing a summary's activation: %w", err)
	}
	if len(c.act) >= c.max {
		clear(c.act)
	}
	c.act[key] = at
	return at, nil
}

// get returns the record under key, nil when there is none.
func (c *recordCache) get(st store.Store, key string) (*record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(st, key)
}

func (c *recordCache) getLocked(st store.Store, key string) (*record, error) {
	if r := c.m[key]; r != nil {
		return r, nil
	}
	b, err := st.Get(key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("compact: reading a summary: %w", err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.Text == "" || r.Tokens <= 0 {
		// A record that does not decode is not ours to use; the span
		// is summarized again under the same name only if it is gone.
		return nil, fmt.Errorf("compact: the stored summary %s does not decode", key)
	}
	c.addLocked(key, &r)
	return &r, nil
}

func (c *recordCache) addLocked(key string, r *record) {
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[key] = r
}
