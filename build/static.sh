#!/usr/bin/env bash
# The default build's environment (make without PYTHON=): libpython linked
# into the binary from the platform's static libpython3.X.a, when it ships
# one, instead of the shared libpython3.X.so.
#
#   build/static.sh            print the exports (eval "$(build/static.sh)")
#   build/static.sh CMD ARG..  run CMD in that environment (the Makefile's way)
#   build/static.sh --say      say why the build links the shared libpython,
#                              if it does (make deps, once per make)
#
# Why: the shared library is built with -fPIC and every call between its own
# functions goes through the PLT, which costs a CPU-bound metric 15-20% per
# core against the distribution's python3.X executable, itself linked with the
# non-PIC (and, on Debian, PGO-optimised) archive. Linking that same archive
# gives the engine the executable's speed (README, Performance).
#
# The python is pkg-config's python3-embed one, as in build/deps.sh:
# exec_prefix/bin/pythonX.Y. Its sysconfig names the archive (LIBPL/LIBRARY,
# else LIBDIR/LIBRARY) and the libraries its built-in modules need (LIBS,
# SYSLIBS, MODLIBS: Debian's has zlib and pyexpat built in). A one-file folder
# bin/pkgconfig/static-<id>/ holds a python3-embed.pc whose Libs are the
# archive, those libraries and -Wl,--export-dynamic, which extension modules
# loaded later with dlopen (lib-dynload's _ctypes, _decimal..., numpy) need to
# find the Py* symbols in the executable. It comes first in PKG_CONFIG_PATH.
# The .pc is written once, after a test link and run of a small program
# against it; a failed test link is remembered beside it (failed) and the build
# falls back to the shared library, as it does when there is no archive.
#
# CGO_CFLAGS repeats python3-embed's -I and adds -DSKY_LIBPYTHON_STATIC=<id>
# (the archive's path, size and time): Go's build cache keys CGO_* flags but
# not pkg-config's output, so static and shared objects never mix, and a new
# archive (a Debian update) rebuilds. It also defines SKY_PYTHON_EXECUTABLE,
# the installation's "BINDIR/pythonX.Y", for the C layer: with libpython in
# the executable, dladdr cannot find the installation from the library's path.
# Both keep cgo's default -g -O2, which setting CGO_CFLAGS replaces.
#
# Falling back (no archive, no python to ask, a test link that fails, or a
# -buildmode=pie/c-shared/plugin build, which the non-PIC archive cannot go
# into) runs CMD unchanged: exactly the plain go build, on python3-embed's
# shared library.
set -euo pipefail

say=0
if [ "${1:-}" = --say ]; then
  say=1
  shift
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
reason=""

# static_env sets the exports, or reason when the build must link the shared
# libpython.
static_env() {
  # Run from inside this environment (a test that builds a program), it
  # must ask the real python3-embed, not its own shim.
  local d kept=""
  local IFS=:
  for d in ${PKG_CONFIG_PATH:-}; do
    case "$d" in "$root"/bin/pkgconfig/*) ;; *) kept="${kept:+$kept:}$d" ;; esac
  done
  unset IFS
  if [ -n "$kept" ]; then export PKG_CONFIG_PATH="$kept"; else unset PKG_CONFIG_PATH; fi
  if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists python3-embed 2>/dev/null; then
    reason="no python3-embed for pkg-config"
    return
  fi
  # GOFLAGS may also come from go env -w (the go command's own file).
  local goflags="${GOFLAGS:-}"
  if [ $# -gt 0 ] && [ "$(basename "$1")" = go ]; then
    goflags="$("$1" env GOFLAGS 2>/dev/null || true)"
  fi
  case " $goflags $* " in
    *buildmode=pie* | *buildmode=c-shared* | *buildmode=shared* | *buildmode=plugin*)
      reason="a position-independent -buildmode cannot take the non-PIC libpython archive"
      return
      ;;
  esac
  local version cflags exec_prefix py
  version="$(pkg-config --modversion python3-embed)"
  cflags="$(echo $(pkg-config --cflags python3-embed))"
  exec_prefix="$(pkg-config --variable=exec_prefix python3-embed)"
  py="$exec_prefix/bin/python$version"
  if [ ! -x "$py" ]; then
    reason="no $py to ask where libpython$version.a is"
    return
  fi
  local info
  info="$("$py" -c '
import sysconfig
v = sysconfig.get_config_var
print(v("VERSION") or "", v("LIBPL") or "", v("LIBDIR") or "", v("LIBRARY") or "", v("BINDIR") or "", sep="\n")
libs = []
for var in ("LIBS", "SYSLIBS", "MODLIBS"):
    for f in (v(var) or "").split():
        if (f.startswith(("-l", "-L")) or f == "-pthread") and f not in libs:
            libs.append(f)
print(" ".join(libs))
' 2>/dev/null)" || {
    reason="$py does not run"
    return
  }
  local pyversion libpl libdir library bindir libs
  { read -r pyversion; read -r libpl; read -r libdir; read -r library; read -r bindir; read -r libs; } <<<"$info"
  if [ "$pyversion" != "$version" ]; then
    reason="$py is CPython $pyversion, python3-embed is $version"
    return
  fi
  local archive=""
  case "$library" in
    *.a)
      for dir in "$libpl" "$libdir"; do
        if [ -n "$dir" ] && [ -f "$dir/$library" ]; then
          archive="$(readlink -f "$dir/$library")"
          break
        fi
      done
      ;;
  esac
  if [ -z "$archive" ]; then
    reason="no ${library:-libpython$version.a} in ${libpl:-LIBPL} or ${libdir:-LIBDIR}"
    return
  fi
  case "$archive" in
    *[[:space:]\"\'\\]*)
      reason="$archive: a path with blanks or quotes cannot go into cgo's flags"
      return
      ;;
  esac

  local id pc shim
  id="$(printf '%s\n' "$archive" "$(stat -c '%s %Y' "$archive")" "$libs" "$cflags" "${CC:-gcc}" | cksum | cut -d' ' -f1)"
  pc="prefix=$exec_prefix
exec_prefix=$exec_prefix
# Written by build/static.sh from $py's sysconfig.
Name: Python
Description: CPython $version linked statically ($archive)
Version: $version
Libs: $archive $libs -Wl,--export-dynamic
Cflags: $cflags
"
  shim="$root/bin/pkgconfig/static-$version-$id"
  if [ -f "$shim/failed" ]; then
    reason="a test link against $archive failed (see $shim/failed; delete it to retry)"
    return
  fi
  if [ "$(cat "$shim/python3-embed.pc" 2>/dev/null)" != "${pc%$'\n'}" ]; then
    mkdir -p "$shim"
    # The test: link as go build does (-no-pie, the archive is not PIC) and run.
    local dir out
    dir="$(mktemp -d)"
    printf '%s\n' '#include <Python.h>' '#include <stdio.h>' \
      'int main(void) { puts(Py_GetVersion()); return 0; }' >"$dir/t.c"
    # shellcheck disable=SC2086 # cflags and libs are lists of flags
    if ! out="$(${CC:-gcc} -no-pie $cflags "$dir/t.c" -o "$dir/t" $archive $libs -Wl,--export-dynamic 2>&1 && "$dir/t" 2>&1)" ||
      [ "${out#"$version".}" = "$out" ]; then
      printf '%s\n' "$out" >"$shim/failed"
      rm -rf "$dir"
      reason="a test link against $archive failed (see $shim/failed; delete it to retry)"
      return
    fi
    rm -rf "$dir"
    printf '%s' "$pc" >"$shim/python3-embed.pc"
  fi

  export PKG_CONFIG_PATH="$shim${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export CGO_CFLAGS="${CGO_CFLAGS:--g -O2} $cflags -DSKY_LIBPYTHON_STATIC=$id -DSKY_PYTHON_EXECUTABLE=\"$bindir/python$version\""
  export CGO_LDFLAGS="${CGO_LDFLAGS:--g -O2}"
}

static_env "$@"

if [ $say = 1 ]; then
  if [ -n "$reason" ]; then
    echo "build/static.sh: $reason; linking the shared libpython (slower per core: README, Performance)" >&2
  fi
  [ $# -eq 0 ] && exit 0
fi

if [ $# -eq 0 ]; then
  [ -n "$reason" ] && exit 0
  for v in PKG_CONFIG_PATH CGO_CFLAGS CGO_LDFLAGS; do
    printf 'export %s=%q\n' "$v" "${!v}"
  done
  exit 0
fi
exec "$@"
