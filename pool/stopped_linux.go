package pool

import (
	"bytes"
	"os"
	"strconv"
)

// stopped reports whether process pid is stopped by a signal (SIGSTOP,
// SIGTSTP, SIGTTIN, SIGTTOU): state T in /proc/PID/stat. A process stopped
// by a tracer (state t, a debugger) is not.
func stopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, so the
	// state is after the last ")".
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}
