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
