package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/skynetml/skynet/cpython"
)

// runVersion prints skynet's version and the CPython it embeds, without
// starting the interpreter.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprintln(stdout, "usage: skynet version   (skynet's version and the CPython it embeds; also skynet --version)")
		return exitOK
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "skynet version: unexpected argument %q\n", args[0])
		return exitUsage
	}
	py := cpython.Version()
	fmt.Fprintln(stdout, versionLine())
	fmt.Fprintf(stdout, "CPython %s\n", py.Runtime)
	lib := py.Library
	if lib == "" {
		lib = "linked into the skynet binary"
	}
	fmt.Fprintf(stdout, "libpython: %s (built against Python.h %s)\n", lib, py.Header)
	return exitOK
}

// versionLine is "skynet VERSION (REVISION) GO OS/ARCH", from the build
// information Go records: the module version when installed with go install,
// else "devel" and the git revision the binary was built from.
func versionLine() string {
	version, rev := "devel", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && modified {
			rev += ", modified"
		}
	}
	if rev != "" {
		version += " (" + rev + ")"
	}
	return fmt.Sprintf("skynet %s %s %s/%s", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
