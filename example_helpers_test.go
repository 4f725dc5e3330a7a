package ctxguard_test

import (
	"bytes"
	"encoding/json"
	"os"
)

// tempDir makes a scratch folder for an example's store.
func tempDir() (string, func()) {
	dir, err := os.MkdirTemp("", "ctxguard-example-")
	if err != nil {
		panic(err)
	}
	return dir + "/store", func() { os.RemoveAll(dir) }
}

// holdsWholeLog reports whether a request body carries bigLog whole, as
// the JSON string a client writes.
func holdsWholeLog(body []byte) bool {
	q, _ := json.Marshal(bigLog)
	return bytes.Contains(body, q[1:len(q)-1])
}
