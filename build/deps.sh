#!/usr/bin/env bash
# Makes sure the C side can build: libpython (python3-embed via pkg-config)
# and the venv module the tests use. Installs with apt-get when root, else
# prints the exact command to run.
set -euo pipefail

missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if ! pkg-config --exists python3-embed 2>/dev/null; then
  missing+=(libpython3-dev)
fi
py="$(pkg-config --variable=exec_prefix python3-embed 2>/dev/null || echo /usr)/bin/python$(pkg-config --modversion python3-embed 2>/dev/null || echo 3)"
if [ -x "$py" ] && ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
command -v gcc >/dev/null 2>&1 || missing+=(gcc)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "build/deps.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
  pkg-config --exists python3-embed
  exit 0
fi
echo "build/deps.sh: missing ${missing[*]}; install them with:" >&2
echo "  sudo apt-get install -y ${missing[*]}" >&2
exit 1
