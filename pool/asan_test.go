//go:build asan

package pool

// asanEnabled: under -asan, AddressSanitizer answers a segfault itself
// (a report and exit 1) before the Go runtime can name the signal.
const asanEnabled = true
