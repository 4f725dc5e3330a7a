package fault

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// bigResultBody is a Messages request whose one tool result (about 80K
// characters) is over persist's 50K threshold: rewriting it needs a blob
// written to the store.
func bigResultBody(seed string) []byte {
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "%s line %05d: some build output that goes on for a while\n", seed, i)
	}
	return fmt.Appendf(nil, `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[`+
		`{"role":"user","content":"build it"},`+
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"make"}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":%q}]}]}`, b.String())
}

// TestDiskFullFailsOpen: when the store cannot write (the disk is full),
// a request that needed a blob goes upstream exactly as the client sent
// it, with the failure's ID in X-Ctxguard-Error-Id and in the log; once
// there is room again, rewriting resumes.
func TestDiskFullFailsOpen(t *testing.T) {
	up := newUpstream(t)
	var in *instance
	var fill, unfill func()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if exec.Command("unshare", "-m", "true").Run() == nil {
		// A 4 MiB tmpfs in a private mount namespace, filled from inside
		// that namespace once ctxguard runs.
		in = start(t, serveOpts{upstream: up.URL, dataDir: filepath.Join(mnt, "data"), env: []string{"MNT=" + mnt},
			wrap: []string{"unshare", "-m", "--propagation", "private", "sh", "-c", `mount -t tmpfs -o size=4m tmpfs "$MNT" && exec "$@"`, "sh"}})
		nsenter := func(args ...string) {
			out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(in.Pid()), "-m", "--"}, args...)...).CombinedOutput()
			if err != nil && !bytes.Contains(out, []byte("No space left")) {
				t.Fatalf("nsenter %v: %v\n%s", args, err, out)
			}
		}
		fill = func() { nsenter("dd", "if=/dev/zero", "of="+filepath.Join(mnt, "fill"), "bs=64k") }
		unfill = func() { nsenter("rm", filepath.Join(mnt, "fill")) }
	} else {
		// No mount namespace here: a file size limit makes every blob
		// write fail the same way (EFBIG instead of ENOSPC).
		t.Log("unshare -m not permitted: limiting the file size ctxguard may write instead of filling a tmpfs")
		in = start(t, serveOpts{upstream: up.URL, wrap: []string{"sh", "-c", `ulimit -f 16 && exec "$@"`, "sh"}})
		fill, unfill = func() {}, nil
	}
	fill()

	body := bigResultBody("full")
	res, got := post(t, client(), in.URL, http.Header{"X-Claude-Code-Session-Id": {"disk"}}, body)
	if res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, got)
	}
	id := res.Header.Get("X-Ctxguard-Error-Id")
	if id == "" {
		t.Errorf("no X-Ctxguard-Error-Id with the store full; headers %v", res.Header)
	}
	sent := up.messages()
	if len(sent) != 1 || !bytes.Equal(sent[0], body) {
		t.Fatalf("the upstream did not get the original body byte for byte")
	}
	if id != "" && !in.waitLog(id) {
		t.Errorf("the error ID %s is not in the log:\n%s", id, in.Tail())
	}
	if unfill == nil {
		return
	}
	unfill()
	body2 := bigResultBody("room again")
	res, _ = post(t, client(), in.URL, http.Header{"X-Claude-Code-Session-Id": {"disk"}}, body2)
	sent = up.messages()
	if res.Header.Get("X-Ctxguard-Error-Id") != "" || bytes.Equal(sent[len(sent)-1], body2) || !bytes.Contains(sent[len(sent)-1], []byte("ctxguard-persisted")) {
		t.Errorf("with room again the result was not persisted (error id %q)", res.Header.Get("X-Ctxguard-Error-Id"))
	}
}
