#!/usr/bin/env bash
# build/pyvenv.sh [PYTHON]: the pinned Python test venv, made once and
# reused; prints its path. make test links it as bin/pyvenv and runs the
# tests that need the peers' own code (DSPy, GEPA, Math-Verify: see
# build/python-test.in) with SKYNET_TEST_VENV pointing at it.
#
# PYTHON is the CPython the skynet binary embeds (the venv's packages are
# imported by skynet's workers too, so it must be the same installation);
# default: python3-embed's, as the default build links it.
#
# The venv lives outside the checkout, in ${SKYNET_CACHE_DIR:-~/.cache/skynet},
# named by the python's version and a hash of the lock file, the python's
# path and version: a fresh clone on the same machine (CI) reuses it, and a
# changed lock makes a new one. Everything is installed from
# build/python-test.lock with --require-hashes --no-deps: exact versions,
# checked downloads, nothing resolved at install time.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
lock="$here/python-test.lock"
python="${1:-}"
if [ -z "$python" ]; then
  prefix="$(pkg-config --variable=exec_prefix python3-embed 2>/dev/null || true)"
  [ -n "$prefix" ] || prefix="$(pkg-config --variable=prefix python3-embed)"
  python="$prefix/bin/python$(pkg-config --modversion python3-embed)"
fi
if ! version="$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>&1)"; then
  echo "build/pyvenv.sh: $python does not run: $version" >&2
  exit 1
fi
key="$( { cat "$lock"; readlink -f "$(command -v "$python")"; echo "$version"; } | sha256sum | cut -c1-12)"
cache="${SKYNET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/skynet}"
venv="$cache/pyvenv-$version-$key"

if [ ! -f "$venv/.complete" ]; then
  mkdir -p "$cache"
  exec 9>"$venv.lock"
  flock 9 # another make test may be making the same venv
  if [ ! -f "$venv/.complete" ]; then
    rm -rf "$venv"
    echo "build/pyvenv.sh: making the pinned test venv (build/python-test.lock: $(grep -c '^[A-Za-z0-9]' "$lock") packages, from PyPI, about 1.2 GB installed) in $venv" >&2
    start=$SECONDS
    "$python" -m venv "$venv"
    if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
      --require-hashes --no-deps -r "$lock" >&2; then
      rm -rf "$venv"
      echo "build/pyvenv.sh: pip could not install build/python-test.lock: the tests of the peers' own code need PyPI (or a mirror: PIP_INDEX_URL)" >&2
      exit 1
    fi
    # The build backend's wheel, kept for the tests that install the client
    # with pip's ordinary resolution and build isolation, offline
    # (--no-index --find-links): the same pinned, hashed flit_core.
    awk '/^flit-core==/{p=1} p{print} p&&!/\\$/{exit}' "$lock" > "$venv/backend.txt"
    if ! "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-input \
      --require-hashes --no-deps --only-binary=:all: -d "$venv/wheels" -r "$venv/backend.txt" >&2; then
      rm -rf "$venv"
      echo "build/pyvenv.sh: pip could not download flit_core (build/python-test.lock) from PyPI" >&2
      exit 1
    fi
    touch "$venv/.complete"
    echo "build/pyvenv.sh: made in $((SECONDS - start))s" >&2
  fi
fi
echo "$venv"
