package module

import "testing"

func TestRoot(t *testing.T) {
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Root(t.TempDir()); err == nil {
		t.Errorf("a folder outside the module gave a root (the module is at %s)", root)
	}
}
