package main

import (
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

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

// pseudoVersion matches the version Go gives a module built from a commit
// that is not a release (v0.0.0-20261207173637-780947cc5ad9).
var pseudoVersion = regexp.MustCompile(`-(0\.)?\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// versionLine is "skynet VERSION GO OS/ARCH", from the build information
// Go records: a release's module version (with its revision), else the git
// revision it was built from, its date and whether the tree had changes
// ("skynet 780947cc5ad9 (2026-12-07, modified) go1.26.8 linux/amd64"); a
// build without version control information (go build -buildvcs=false, a
// test binary) is "devel".
func versionLine() string {
	version, rev, date, modified := "", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" && !pseudoVersion.MatchString(v) {
			version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value[:min(len(s.Value), 12)]
			case "vcs.time":
				date, _, _ = strings.Cut(s.Value, "T")
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var notes []string
	switch {
	case version != "" && rev != "":
		notes = append(notes, rev)
	case version == "" && rev != "":
		version = rev
		if date != "" {
			notes = append(notes, date)
		}
	case version == "":
		version = "devel"
		notes = append(notes, "no revision recorded: make build records it")
	}
	if modified {
		notes = append(notes, "modified")
	}
	if len(notes) > 0 {
		version += " (" + strings.Join(notes, ", ") + ")"
	}
	return fmt.Sprintf("skynet %s %s %s/%s", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
