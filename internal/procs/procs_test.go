package procs

import (
	"testing"
)

func TestParseStatusMem(t *testing.T) {
	status := "Name:\tctxguard\nVmPeak:\t 1300000 kB\nVmHWM:\t   30720 kB\nVmRSS:\t   20480 kB\nThreads:\t7\n"
	peak, rss, err := ParseStatusMem([]byte(status))
	if err != nil || peak != 30<<20 || rss != 20<<20 {
		t.Errorf("ParseStatusMem = %d, %d, %v", peak, rss, err)
	}
	if _, _, err := ParseStatusMem([]byte("Name:\tx\nVmRSS:\t1 kB\n")); err == nil {
		t.Error("ParseStatusMem without VmHWM: no error")
	}
}

func TestDialable(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8787": "127.0.0.1:8787",
		"0.0.0.0:8787":   "127.0.0.1:8787",
		"[::]:8787":      "127.0.0.1:8787",
		"[::1]:8787":     "[::1]:8787",
		"localhost:1":    "localhost:1",
	} {
		if got := dialable(in); got != want {
			t.Errorf("dialable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ModuleRoot(t.TempDir()); err == nil {
		t.Errorf("a folder outside the module gave a root (the module is at %s)", root)
	}
}
