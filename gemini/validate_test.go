package gemini

import (
	"strings"
	"testing"
)

// TestValidateRewrite: what the passes and the guard may change is
// allowed; anything else is refused, a signature moved or altered
// included. The calls are of earlier turns, whose signatures a Gemini
// model does not check.
func TestValidateRewrite(t *testing.T) {
	orig := `{"contents":[{"role":"user","parts":[{"text":"go"}]},` +
		`{"role":"model","parts":[{"text":"t","thought":true,"thoughtSignature":"VA=="},{"functionCall":{"name":"sh","args":{"c":"ls"},"id":"a"},"thoughtSignature":"QQ=="}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"sh","response":{"output":"big"},"id":"a"}}]},` +
		`{"role":"model","parts":[{"thoughtSignature":"Qg==","functionCall":{"name":"sh","args":{"c":"pwd"},"id":"b"}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"sh","response":{"output":"/"},"id":"b"}}]},` +
		`{"role":"model","parts":[{"text":"done"}]},{"role":"user","parts":[{"text":"thanks"}]}],"tools":[]}`
	for _, tc := range []struct {
		name, from, to string
		ok             bool
	}{
		{"unchanged", "", "", true},
		{"result cleared", `"output":"big"`, `"output":"[cleared]"`, true},
		{"args cleared", `"args":{"c":"ls"}`, `"args":{"c":"[cleared]"}`, true},
		{"signature skipped", `"thoughtSignature":"QQ=="`, `"thoughtSignature":"skip_thought_signature_validator"`, true},
		{"signature removed", `,"thoughtSignature":"QQ=="`, ``, true},
		{"first-member signature removed", `"thoughtSignature":"Qg==",`, ``, true},
		{"args cleared and signature removed", `"args":{"c":"ls"},"id":"a"},"thoughtSignature":"QQ=="`, `"args":{"c":"[cleared, a longer stub]"},"id":"a"}`, true},
		{"thought removed", `{"text":"t","thought":true,"thoughtSignature":"VA=="},`, ``, true},
		{"signature altered", `"QQ=="`, `"QR=="`, false},
		{"signature moved", `{"functionCall":{"name":"sh","args":{"c":"ls"},"id":"a"},"thoughtSignature":"QQ=="}`, `{"functionCall":{"name":"sh","args":{"c":"ls"},"id":"a"}},{"text":"x","thoughtSignature":"QQ=="}`, false},
		{"args not an object", `"args":{"c":"ls"}`, `"args":"ls"`, false},
		{"call renamed", `"name":"sh","args":{"c":"ls"}`, `"name":"bash","args":{"c":"ls"}`, false},
		{"response dropped", `{"role":"user","parts":[{"functionResponse":{"name":"sh","response":{"output":"/"},"id":"b"}}]}`, `{"role":"user","parts":[{"text":"x"}]}`, false},
		{"tools changed", `"tools":[]`, `"tools":[{}]`, false},
	} {
		sent := strings.Replace(orig, tc.from, tc.to, 1)
		if tc.from != "" && sent == orig {
			t.Fatalf("%s: %q not in the body", tc.name, tc.from)
		}
		err := ValidateRewrite([]byte(orig), []byte(sent))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestValidate: the API's rules, each broken once.
func TestValidate(t *testing.T) {
	call := `{"role":"model","parts":[{"functionCall":{"name":"sh","args":{},"id":"a"},"thoughtSignature":"QQ=="},{"functionCall":{"name":"sh","args":{},"id":"b"}}]}`
	resp := `{"role":"user","parts":[{"functionResponse":{"name":"sh","response":{"output":"1"},"id":"a"}},{"functionResponse":{"name":"sh","response":{"output":"2"},"id":"b"}}]}`
	user := `{"role":"user","parts":[{"text":"go"}]}`
	body := func(cs ...string) []byte { return []byte(`{"contents":[` + strings.Join(cs, ",") + `]}`) }
	for _, tc := range []struct {
		name string
		body []byte
		ok   bool
	}{
		{"valid", body(user, call, resp), true},
		{"a resumed session's repeated responses", body(user, call, strings.Replace(resp, `]}`, `,{"functionResponse":{"name":"sh","response":{"output":"1"},"id":"a"}}]}`, 1)), true},
		{"unanswered call", body(user, call, strings.Replace(resp, `,{"functionResponse":{"name":"sh","response":{"output":"2"},"id":"b"}}`, "", 1)), false},
		{"response without a call", body(user, resp), false},
		{"calls not answered before the next content", body(user, call, user), false},
		{"no parts", body(`{"role":"user","parts":[]}`), false},
		{"unknown role", body(`{"role":"system","parts":[{"text":"x"}]}`), false},
		{"a call in a user content", body(strings.Replace(call, `"model"`, `"user"`, 1)), false},
		{"the current turn's first call unsigned", body(user, strings.Replace(call, `,"thoughtSignature":"QQ=="`, "", 1), resp, `{"role":"model","parts":[{"text":"x","thoughtSignature":"Qg=="}]}`), false},
		{"an older turn's call unsigned", body(user, strings.Replace(call, `,"thoughtSignature":"QQ=="`, "", 1), resp, `{"role":"model","parts":[{"text":"x","thoughtSignature":"Qg=="}]}`, user), true},
		{"no signatures at all (Gemini 2.5)", body(user, strings.Replace(call, `,"thoughtSignature":"QQ=="`, "", 1), resp), true},
	} {
		if err := Validate(tc.body); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
