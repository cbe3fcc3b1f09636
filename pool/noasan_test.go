//go:build !asan

package pool

const asanEnabled = false
