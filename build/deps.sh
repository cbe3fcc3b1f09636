#!/usr/bin/env bash
# Makes sure the C side can build: libpython (python3-embed via pkg-config)
# and the venv module the tests use. Installs with apt-get when root, else
# prints the exact command to run.
#
# The default build's tests also use Debian's python3-numpy and python3-sympy
# (a C-extension grader, sympy-based graders) and chromium (skynet report's
# page in a real browser): installed the same way, but optional: when they
# cannot be, deps.sh says so and the build goes on; the tests that need them
# skip, saying why.
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

# The optional test packages, for the default build's python only (Debian's
# packages are for it), found by import name wherever that python looks
# (dist-packages, a pip install). Said at the top level of make only (make
# test runs deps again in sub-makes).
if [ -z "$python" ] && [ -x "$py" ] && [ "${MAKELEVEL:-0}" -le 1 ]; then
  optional=()
  for m in numpy:python3-numpy sympy:python3-sympy; do
    "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('${m%%:*}') is None)" 2>/dev/null ||
      optional+=("${m#*:}")
  done
  # Headless Chromium opens skynet report's page in the tests (skipped,
  # saying so, without it).
  command -v chromium >/dev/null 2>&1 || optional+=(chromium)
  if [ ${#optional[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "build/deps.sh: installing ${optional[*]} (for tests)" >&2
      export DEBIAN_FRONTEND=noninteractive
      if ! { apt-get update -qq >/dev/null && apt-get install -y -qq "${optional[@]}" >/dev/null; }; then
        echo "build/deps.sh: could not install ${optional[*]}; the tests that need them will skip" >&2
      fi
    else
      echo "build/deps.sh: optional ${optional[*]} missing (the tests that need them skip); install them with:" >&2
      echo "  sudo apt-get install -y ${optional[*]}" >&2
    fi
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
