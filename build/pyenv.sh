#!/usr/bin/env bash
# The build environment for one CPython chosen by its python executable.
#
#   build/pyenv.sh PYTHON            print the exports (eval "$(build/pyenv.sh PYTHON)")
#   build/pyenv.sh PYTHON CMD ARG..  run CMD in that environment (the Makefile's way)
#
# cgo asks pkg-config for python3-embed (cpython/cpython.go, skynetmod). To make
# that name mean PYTHON's libpython, a one-file folder bin/pkgconfig/<id>/ holds
# python3-embed.pc -> LIBPC/python-X.Y-embed.pc and comes first in
# PKG_CONFIG_PATH: the versioned file exists in every CPython install, while the
# unversioned python3-embed.pc is missing after "make altinstall" and, in a
# shared prefix, may belong to another version. CGO_LDFLAGS adds an rpath to
# LIBDIR so bin/skynet and test binaries load that libpython without
# LD_LIBRARY_PATH. CGO_CFLAGS repeats pkg-config's -I for the headers: Go's
# build cache keys CGO_* flags but not pkg-config's output, so without it two
# versions sharing one LIBDIR (/usr/local altinstalls) would reuse each
# other's objects. Both keep cgo's default -g -O2, which setting them replaces.
# SKYNET_PYTHON, PYTHON's absolute path, tells the tests which python made the
# build (engine's virtualenv test).
set -euo pipefail

if [ $# -lt 1 ] || [ -z "$1" ]; then
  echo "usage: build/pyenv.sh PYTHON [CMD ARG...]" >&2
  exit 2
fi
python="$1"
shift
die() { echo "build/pyenv.sh: $python: $*" >&2; exit 1; }

command -v "$python" >/dev/null 2>&1 || die "not found"
info="$("$python" -c '
import sys, sysconfig
v = sysconfig.get_config_var
print(v("VERSION"), v("Py_ENABLE_SHARED"), v("LIBPC"), v("LIBDIR"), v("INCLUDEPY"), sys.executable, sep="\n")
')" || die "cannot run it"
{ read -r version; read -r shared; read -r libpc; read -r libdir; read -r include; read -r executable; } <<<"$info"

case "$version" in
  3.10 | 3.11 | 3.12 | 3.13) ;;
  *) die "CPython $version; skynet is built and tested on 3.10 to 3.13" ;;
esac
[ "$shared" = 1 ] || die "CPython $version is not a shared build (Py_ENABLE_SHARED is $shared); rebuild it with --enable-shared (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared)"
pc="$libpc/python-$version-embed.pc"
[ -f "$pc" ] || die "no $pc (its pkg-config file for embedding)"

# One folder per LIBPC, so two installs of one version never share it.
root="$(cd "$(dirname "$0")/.." && pwd)"
shim="$root/bin/pkgconfig/$version-$(printf '%s' "$libpc" | cksum | cut -d' ' -f1)"
if [ "$(readlink "$shim/python3-embed.pc" 2>/dev/null)" != "$pc" ]; then
  mkdir -p "$shim"
  ln -sfn "$pc" "$shim/python3-embed.pc"
fi

export PKG_CONFIG_PATH="$shim${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CGO_CFLAGS="${CGO_CFLAGS:--g -O2} -I$include"
export CGO_LDFLAGS="${CGO_LDFLAGS:--g -O2} -Wl,-rpath,$libdir"
export SKYNET_PYTHON="$executable"

if [ $# -eq 0 ]; then
  for v in PKG_CONFIG_PATH CGO_CFLAGS CGO_LDFLAGS SKYNET_PYTHON; do
    printf 'export %s=%q\n' "$v" "${!v}"
  done
  exit 0
fi
exec "$@"
