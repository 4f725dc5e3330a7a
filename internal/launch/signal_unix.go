//go:build unix

package launch

import (
	"os"
	"syscall"
	"unsafe"
)

// forwarded are the signals launch passes on to the client.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP,
	syscall.SIGWINCH, syscall.SIGUSR1, syscall.SIGUSR2}

// fromTerminal reports whether a terminal sends signal s to its whole
// foreground process group (Ctrl-C, Ctrl-\, a window resize).
func fromTerminal(s os.Signal) bool {
	return s == syscall.SIGINT || s == syscall.SIGQUIT || s == syscall.SIGWINCH
}

// forward decides whether launch passes s on to the client. The client
// runs in launch's process group, so when that group is the terminal's
// foreground group (foreground), the terminal has sent s to the client
// already: passing it on too would deliver one Ctrl-C twice. Any other
// signal, and every signal when launch does not own the terminal (in the
// background, under a pipe or a supervisor), comes from kill(2) and is
// passed on.
func forward(s os.Signal, foreground bool) bool {
	return !(foreground && fromTerminal(s))
}

// foreground reports whether this process's group is the foreground
// process group of the terminal on standard input, output or error.
func foreground() bool {
	for fd := 0; fd <= 2; fd++ {
		var pgrp int32
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
		if errno == 0 {
			return int(pgrp) == syscall.Getpgrp()
		}
	}
	return false
}

// exitCode is the status a shell reports for a process that ended with
// ps: its exit code, or 128+n when signal n killed it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalCode is the status for an ended run that signal s interrupted.
func signalCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}
