package convbuild

import (
	"hash/maphash"
	"testing"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

func TestQuickKey(t *testing.T) {
	seed := maphash.MakeSeed()
	key := func(body, system, list string) (uint64, bool) { return QuickKey(seed, []byte(body), system, list) }
	const start = `{"system":"be brief","model":"m","messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}`
	base, ok := key(start+`]}`, "system", "messages")
	if !ok {
		t.Fatal("a request: not ok")
	}
	for _, tc := range []struct {
		name, body   string
		system, list string
		same, wantOK bool
	}{
		{"turns appended", start + `,{"role":"assistant","content":"yo"},{"role":"user","content":"more"}]}`, "system", "messages", true, true},
		{"what follows the first user message is not read", start + `,{"role":` + "\x00" + `]}`, "system", "messages", true, true},
		{"keys after the list are not read", start + `],"max_tokens":"x}`, "system", "messages", true, true},
		{"a user string re-encoded as blocks", `{"system":"be brief","messages":[{"role":"system","content":"x"},{"role":"user","content":[{"type":"text","text":"hi","cache_control":{}}]}]}`, "system", "messages", true, true},
		{"the system prompt as blocks", `{"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}`, "system", "messages", true, true},
		{"another first user message", `{"system":"be brief","messages":[{"role":"system","content":"x"},{"role":"user","content":"ho"}]}`, "system", "messages", false, true},
		{"another system prompt", `{"system":"be long","messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}`, "system", "messages", false, true},
		{"a system prompt after the list is not read", `{"messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}],"system":"be brief"}`, "system", "messages", false, true},
		{"no system key: the member is skipped", start + `]}`, "", "messages", false, true},
		{"another list key", start + `]}`, "system", "input", false, false},
		{"no user message: what there is", `{"messages":[{"role":"assistant","content":"a"}]}`, "", "messages", false, true},
		{"a string list", `{"input":"hi"}`, "instructions", "input", false, true},
		{"not an object", `[1]`, "system", "messages", false, false},
		{"broken before the list", `{"system":`, "system", "messages", false, false},
		{"no list", `{"system":"be brief"}`, "system", "messages", false, false},
	} {
		got, ok := key(tc.body, tc.system, tc.list)
		if ok != tc.wantOK || (ok && (got == base) != tc.same) {
			t.Errorf("%s: ok %v, same key %v; want %v, %v", tc.name, ok, got == base, tc.wantOK, tc.same)
		}
	}
	a, _ := key(`{"input":"hi"}`, "instructions", "input")
	b, _ := key(`{"input":"hi","model":"m"}`, "instructions", "input")
	c, _ := key(`{"input":"ho"}`, "instructions", "input")
	if a != b || a == c {
		t.Errorf("string lists: %x %x %x; want the first two equal, the third not", a, b, c)
	}
}

// FuzzQuickKey: any body gives a key or not, without panicking, the same
// one every time, and the key of a body that is an object with a list
// does not depend on what follows the list.
func FuzzQuickKey(f *testing.F) {
	f.Add([]byte(`{"system":"s","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"instructions":"s","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`))
	f.Add([]byte(`{"input":"hi"}`))
	seed := maphash.MakeSeed()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, names := range [][2]string{{"system", "messages"}, {"instructions", "input"}, {"", "messages"}} {
			k1, ok1 := QuickKey(seed, body, names[0], names[1])
			k2, ok2 := QuickKey(seed, body, names[0], names[1])
			if k1 != k2 || ok1 != ok2 || (!ok1 && k1 != 0) {
				t.Fatalf("%q: %x %v, then %x %v", body, k1, ok1, k2, ok2)
			}
			root, err := jsonscan.Root(body)
			if err != nil || jsonscan.KindOf(body, root) != jsonscan.Object {
				continue
			}
			if l, err := jsonscan.Lookup(body, root, names[1]); err == nil && ok1 {
				more := append(append([]byte(nil), body[:l.End]...), `,"zz":[}`...)
				if k3, ok3 := QuickKey(seed, more, names[0], names[1]); !ok3 || k3 != k1 {
					t.Fatalf("%q: bytes after the list changed the key", body)
				}
			}
		}
	})
}

func TestClientCompaction(t *testing.T) {
	for _, tc := range []struct {
		name, list string
		want       bool
	}{
		{"the prompt", `[{"role":"user","content":"fix it"},{"role":"assistant","content":"ok"},{"role":"user","content":"` + ClientCompactPrompt + `conversation so far."}]`, true},
		{"after white space, raw and escaped", `[{"role":"user","content":" \t\n\r ` + ClientCompactPrompt + `RECENT portion"}]`, true},
		{"in a later block of the last user message", `[{"role":"user","content":["see","` + ClientCompactPrompt + `x"]}]`, true},
		{"an assistant message after it is no matter", `[{"role":"user","content":"` + ClientCompactPrompt + `x"},{"role":"assistant","content":"..."}]`, true},
		{"only in an earlier user message", `[{"role":"user","content":"` + ClientCompactPrompt + `x"},{"role":"assistant","content":"ok"},{"role":"user","content":"go on"}]`, false},
		{"not at the start", `[{"role":"user","content":"Please: ` + ClientCompactPrompt + `x"}]`, false},
		{"cut short", `[{"role":"user","content":"Your task is to create a detailed"}]`, false},
		{"no user message", `[{"role":"assistant","content":"` + ClientCompactPrompt + `"}]`, false},
	} {
		c, err := toyParse([]byte(`{"list":` + tc.list + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := ClientCompaction(c); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		c.Release()
	}
	if ClientCompaction(&conversation.Conversation{}) {
		t.Error("an empty conversation is a compaction")
	}
}
