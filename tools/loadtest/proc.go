package loadtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// which Linux fixes at 100 for user space on every architecture Go
// supports.
const clockTick = 10 * time.Millisecond

// cpuTime returns the CPU time (user + system) process pid has used, from
// /proc/PID/stat, at a resolution of clockTick.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the content
// of /proc/PID/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("loadtest: /proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, errors.New("loadtest: /proc stat: too few fields")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("loadtest: /proc stat: %w", err)
	}
	return time.Duration(ut+st) * clockTick, nil
}

// busyTime returns the CPU time the whole machine has spent busy (user,
// nice, system, irq, softirq and steal of the "cpu" line of /proc/stat),
// at a resolution of clockTick.
func busyTime() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStatBusy(b)
}

// parseProcStatBusy reads the busy time from the content of /proc/stat.
func parseProcStatBusy(b []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("loadtest: /proc/stat: no cpu line")
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("loadtest: /proc/stat: %w", err)
		}
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}

// cpuMeter measures, over an interval, the CPU time the machine spent
// busy and the share the harness and its processes took.
type cpuMeter struct {
	start       time.Time
	busy0, our0 time.Duration
	pids        []int
}

func newCPUMeter(pids ...int) *cpuMeter {
	m := &cpuMeter{start: time.Now(), pids: append([]int{os.Getpid()}, pids...)}
	m.busy0, _ = busyTime()
	m.our0 = m.ours()
	return m
}

func (m *cpuMeter) ours() time.Duration {
	var t time.Duration
	for _, pid := range m.pids {
		if c, err := cpuTime(pid); err == nil {
			t += c
		}
	}
	return t
}

// foreign returns the fraction of the machine's CPU time (elapsed ×
// CPUs) that other processes used since the meter started.
func (m *cpuMeter) foreign(cpus int) float64 {
	busy, err := busyTime()
	if err != nil || m.busy0 == 0 {
		return 0
	}
	other := (busy - m.busy0) - (m.ours() - m.our0)
	avail := time.Since(m.start) * time.Duration(cpus)
	if other <= 0 || avail <= 0 {
		return 0
	}
	return float64(other) / float64(avail)
}
