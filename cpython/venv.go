package cpython

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// VenvError is a virtualenv made by another CPython than the one this
// process embeds. Its packages were installed for that Python, and its
// bin/python (sys.executable, so what subprocess and multiprocessing's
// spawn start) is that Python. Another major.minor cannot work: the
// interpreter would not even look in the venv's lib/python3.X (Fatal).
// The same major.minor of another installation or patch release imports
// the venv's packages, but scores under another CPython than a script run
// with the venv's python.
type VenvError struct {
	Venv        string // the venv's directory
	VenvVersion string // the version pyvenv.cfg records, "3.12.1"
	VenvPython  string // the python that made it, from pyvenv.cfg ("" when it does not say)
	Version     string // the embedded CPython's version, "3.11.2"
	Python      string // the embedded CPython's python executable ("" when unknown)
}

// Fatal says the venv is of another major.minor: it cannot be used.
func (e *VenvError) Fatal() bool { return minor(e.VenvVersion) != minor(e.Version) }

func (e *VenvError) Error() string {
	made := "CPython " + e.VenvVersion
	if e.VenvPython != "" {
		made += " (" + e.VenvPython + ")"
	}
	embedded := "CPython " + e.Version
	exe := e.Python
	if exe != "" {
		embedded += " (" + exe + ")"
	} else {
		exe = "python" + minor(e.Version)
	}
	if e.Fatal() {
		return fmt.Sprintf("the virtualenv %s was made by %s, but skynet embeds %s: its packages are for another Python, which skynet cannot import. Make the venv with %s -m venv, or build skynet against that Python (make build PYTHON=%s)",
			e.Venv, made, embedded, exe, orPython(e.VenvPython))
	}
	return fmt.Sprintf("the virtualenv %s was made by %s, but skynet embeds %s: the venv's packages import, but a script run with the venv's python runs the other CPython, and so do subprocesses and multiprocessing's spawn started from a metric (sys.executable is the venv's python). For the same Python everywhere, make the venv with %s -m venv",
		e.Venv, made, embedded, exe)
}

func orPython(p string) string {
	if p == "" {
		return "/path/to/python3"
	}
	return p
}

// minor is "3.11" of "3.11.2".
func minor(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
}

// CheckVenv looks at the virtualenv the interpreter would use (executable
// as in Config; "" resolves as Initialize does: $VIRTUAL_ENV's) and returns
// a *VenvError when another CPython made it, nil otherwise (no venv, or
// one of this CPython). It reads pyvenv.cfg only: no interpreter starts.
func CheckVenv(executable string) *VenvError {
	exe := resolve(Config{Executable: executable}).Executable
	if exe == "" {
		return nil
	}
	venv := filepath.Dir(filepath.Dir(exe))
	cfg := readPyvenvCfg(filepath.Join(venv, "pyvenv.cfg"))
	if cfg == nil {
		cfg = readPyvenvCfg(filepath.Join(filepath.Dir(exe), "pyvenv.cfg"))
	}
	if cfg == nil {
		return nil // not a venv: an installation's own python
	}
	version := cfg["version"]
	if version == "" {
		version = cfg["version_info"] // virtualenv's spelling
	}
	if version == "" {
		return nil
	}
	own := runtimeVersion()
	e := &VenvError{Venv: venv, VenvVersion: version, VenvPython: cfg["executable"], Version: own, Python: installedPython()}
	if e.VenvPython == "" && cfg["home"] != "" {
		e.VenvPython = filepath.Join(cfg["home"], "python"+minor(version))
	}
	if minor(version) != minor(own) {
		return e
	}
	if strings.TrimSuffix(version, "+") != own {
		return e // another patch release
	}
	// The same version: another installation only when both are known and
	// differ (a venv of /usr/bin/python3.11 records home = /usr/bin).
	if home := cfg["home"]; home != "" && e.Python != "" && !sameDir(home, filepath.Dir(e.Python)) {
		return e
	}
	return nil
}

// runtimeVersion is "3.11.2" of Py_GetVersion().
func runtimeVersion() string {
	v, _, _ := strings.Cut(Version().Runtime, " ")
	return v
}

// readPyvenvCfg reads a pyvenv.cfg's "key = value" lines, or nil when there is none.
func readPyvenvCfg(path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	cfg := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			cfg[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return cfg
}

// sameDir says a and b are one directory, through links.
func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}
