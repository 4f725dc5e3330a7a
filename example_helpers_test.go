package ctxguard_test

import "os"

// tempDir makes a scratch folder for an example's store.
func tempDir() (string, func()) {
	dir, err := os.MkdirTemp("", "ctxguard-example-")
	if err != nil {
		panic(err)
	}
	return dir + "/store", func() { os.RemoveAll(dir) }
}
