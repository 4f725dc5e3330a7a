package compact

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/store"
)

// TestReadRecord: a stored record reads back with its text (the
// dashboard's request page shows it).
func TestReadRecord(t *testing.T) {
	st := store.NewMemory()
	in := record{Text: "[compacted 4 messages]\nthe summary", Summary: "the summary", Messages: 4, Tokens: 9, Model: "m", InputTokens: 100, OutputTokens: 10}
	b, _ := json.Marshal(in)
	if err := st.Put(context.Background(), "compact/k", b); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRecord(context.Background(), st, "compact/k")
	if err != nil {
		t.Fatal(err)
	}
	want := Record{Text: in.Text, Messages: 4, Tokens: 9, Model: "m", InputTokens: 100, OutputTokens: 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ReadRecord(context.Background(), st, "compact/none"); err == nil {
		t.Error("a missing record read without error")
	}
}
