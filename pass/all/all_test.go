package all_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/pass"
	_ "github.com/ctxguard/ctxguard/pass/all"
	"github.com/ctxguard/ctxguard/store"
)

// TestOrders: the registry holds the passes in the order the package
// documents, for the pipeline and for the file, and each module's
// defaults are valid and compile, switched on, to a pass of its name.
func TestOrders(t *testing.T) {
	s := pass.Defaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range pass.Modules() {
		keys = append(keys, m.Key)
		if err := s.Switch(m.Name, true); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff([]string{"compress", "digest", "persist", "clear", "thinking_guard", "compact"}, keys); d != "" {
		t.Errorf("sections as listed (-want +got):\n%s", d)
	}
	b, err := pass.Compile(s, pass.Env{Blobs: &store.Blobs{Store: store.NewMemory()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range b.Closers(nil) {
			c.Close()
		}
	}()
	var names []string
	for _, p := range b.Passes() {
		names = append(names, p.Name())
	}
	if d := cmp.Diff([]string{"compress", "digest", "persist", "thinking", "clear", "compact"}, names); d != "" {
		t.Errorf("pipeline order (-want +got):\n%s", d)
	}
}
