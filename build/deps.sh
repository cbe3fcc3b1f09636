#!/usr/bin/env bash
# Makes sure the C side can build: libpython (python3-embed via pkg-config)
# and the venv module the tests use. Installs with apt-get when root, else
# prints the exact command to run.
#
# build/deps.sh PYTHON checks a chosen CPython instead of the system one
# (make PYTHON=...): it must be a shared 3.10-3.13 build (build/pyenv.sh says
# why not) with venv and ensurepip. What it lacks is printed, not installed:
# apt-get cannot fix a python it did not install.
set -euo pipefail

python="${1:-}"
missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if [ -z "$python" ]; then
  if ! pkg-config --exists python3-embed 2>/dev/null; then
    missing+=(libpython3-dev)
  fi
  py="$(pkg-config --variable=exec_prefix python3-embed 2>/dev/null || echo /usr)/bin/python$(pkg-config --modversion python3-embed 2>/dev/null || echo 3)"
  if [ -x "$py" ] && ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    missing+=(python3-venv)
  fi
fi
command -v gcc >/dev/null 2>&1 || missing+=(gcc)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "build/deps.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
    [ -n "$python" ] || pkg-config --exists python3-embed
  else
    echo "build/deps.sh: missing ${missing[*]}; install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if [ -n "$python" ]; then
  "$(dirname "$0")/pyenv.sh" "$python" pkg-config --exists python3-embed
  if ! err="$("$python" -c 'import venv, ensurepip' 2>&1)"; then
    echo "build/deps.sh: $python cannot create virtualenvs (the tests do): ${err##*$'\n'}" >&2
    echo "  install its venv and ensurepip modules (Debian: python3.X-venv; a source build has them unless disabled)" >&2
    exit 1
  fi
fi
