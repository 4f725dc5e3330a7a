package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ModuleRoot returns the folder holding the go.mod of module
// github.com/ctxguard/ctxguard, searching dir and its parents.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/ctxguard/ctxguard\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("loadtest: no go.mod of github.com/ctxguard/ctxguard in %s or above", dir)
		}
	}
}

// build compiles ./cmd/ctxguard and ./internal/loadtest/cmd/passthrough
// of the module at root into dir, with the same flags, and returns their
// paths.
func build(ctx context.Context, root, dir string) (ctxguardBin, passthroughBin string, err error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/ctxguard", "./internal/loadtest/cmd/passthrough")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("loadtest: go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "ctxguard"), filepath.Join(dir, "passthrough"), nil
}

// proc is a proxy process the harness started.
type proc struct {
	name string
	cmd  *exec.Cmd
	URL  string // "http://127.0.0.1:PORT"

	mu     sync.Mutex
	tail   []string // the last lines of stderr
	lines  int
	errors int // stderr lines at level ERROR
	done   chan struct{}
}

var listening = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// startProc runs bin with args and waits (at most 30 s) for it to print
// "listening on http://ADDR" on stderr. It keeps draining stderr after
// that (a full pipe would stall the process), remembering the last lines
// for error messages and counting error-level lines.
func startProc(name, bin string, env []string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = io.Discard
	// The process dies with the harness even if the harness is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadtest: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.lines++
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, `"level":"ERROR"`) {
				p.errors++
			}
			p.tail = append(p.tail, line)
			if len(p.tail) > 20 {
				p.tail = p.tail[1:]
			}
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case p.URL = <-addr:
		return p, nil
	case <-p.done:
		_ = cmd.Wait()
		return nil, fmt.Errorf("loadtest: %s exited before listening: %s", name, p.stderrTail())
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("loadtest: %s did not listen within 30s: %s", name, p.stderrTail())
	}
}

func (p *proc) stderrTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

func (p *proc) errorLines() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errors
}

// stop asks the process to end (SIGTERM), and kills it after 10 s.
func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	waited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-waited
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

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

// memory returns the process's peak and current resident set size in
// bytes (VmHWM and VmRSS of /proc/PID/status).
func memory(pid int) (peak, rss int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatusMem(b)
}

// parseStatusMem reads VmHWM and VmRSS (in kB) from the content of
// /proc/PID/status, in bytes.
func parseStatusMem(b []byte) (peak, rss int64, err error) {
	var havePeak, haveRSS bool
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("loadtest: /proc status %s: %w", k, err)
		}
		if k == "VmHWM" {
			peak, havePeak = n<<10, true
		} else {
			rss, haveRSS = n<<10, true
		}
	}
	if !havePeak || !haveRSS {
		return 0, 0, errors.New("loadtest: /proc status: no VmHWM or VmRSS")
	}
	return peak, rss, nil
}

// resetPeak resets the process's VmHWM to its current RSS (Linux 4.0+,
// "5" to /proc/PID/clear_refs). It reports whether that worked.
func resetPeak(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
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
