#!/usr/bin/env bash
# make test-pythons: go test -count=1 ./... against every CPython 3.10-3.13
# found here (pyenv's versions, and python3.1X on PATH), each built through
# build/pyenv.sh. One line per python, then a summary; a python that cannot
# be built against (not a shared build, no -embed .pc, no venv) is skipped
# with the reason. Finding none is not a failure. Logs: bin/test-pythons/.
# Another build of the default
# build's minor version (pyenv's 3.11 beside Debian's) runs every package but
# cmd/skynet, whose tests make test has run on that version (saves ~50 s of CI).
set -uo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
logs=bin/test-pythons
mkdir -p "$logs"

# Candidates, in order; the same install found twice is tested once.
candidates=()
root="$(pyenv root 2>/dev/null || true)"
if [ -n "$root" ]; then
  for p in "$root"/versions/3.1[0-3]*/bin/python3; do
    [ -x "$p" ] && candidates+=("$p")
  done
fi
for v in 10 11 12 13; do
  while read -r p; do
    # pyenv's shims stand for the versions above (or for none).
    [ -n "$p" ] && { [ -z "$root" ] || [[ "$p" != "$root"/shims/* ]]; } && candidates+=("$p")
  done < <(type -aP "python3.$v" 2>/dev/null)
done

declare -A seen
# The default build (Debian's python3-embed) is what make test runs on.
default_real="$(/usr/bin/python3 -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null || true)"
[ -n "$default_real" ] && seen[$default_real]=default
# Its minor version: another build of it runs the C layer and the engine
# only, since make test has run the command's tests on that version.
default_minor="$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)"
found=() # "version<TAB>python"
for p in "${candidates[@]}"; do
  if ! id="$("$p" -c 'import os, platform, sys; print(platform.python_version(), os.path.realpath(sys.executable))' 2>/dev/null)"; then
    echo "$p: skipped: it does not run"
    continue
  fi
  real="${id#* }"
  if [ "${seen[$real]:-}" = default ]; then
    echo "$p: skipped: it is the default build, which make test runs on"
    seen[$real]=1
    continue
  fi
  [ -n "${seen[$real]:-}" ] && continue
  seen[$real]=1
  found+=("${id%% *}"$'\t'"$p")
done

if [ ${#found[@]} -eq 0 ]; then
  echo "test-pythons: no CPython 3.10-3.13 found (pyenv versions, python3.1X on PATH); nothing to test"
  exit 0
fi

passed=() failed=() skipped=()
start=$SECONDS
while IFS=$'\t' read -r version python; do
  label="CPython $version ($python)"
  if ! why="$(bash build/deps.sh "$python" 2>&1)"; then
    echo "$label: skipped: $(printf '%s\n' "$why" | grep -v '^  ' | tail -n1 | sed -e 's/^build\/[a-z]*\.sh: //' -e "s|^$python: ||")"
    skipped+=("$version")
    continue
  fi
  log="$logs/$version.log"
  t0=$SECONDS
  pkgs=(./...)
  if [ "${version%.*}" = "$default_minor" ]; then
    pkgs=(./cpython ./skynetmod ./engine ./pool ./llm ./reward)
    label="$label [the default build's minor version: C layer and engine only]"
  fi
  if build/pyenv.sh "$python" $GO test -count=1 "${pkgs[@]}" >"$log" 2>&1; then
    echo "$label: ok ($((SECONDS - t0))s)"
    passed+=("$version")
  else
    echo "$label: FAIL ($((SECONDS - t0))s), log $log:"
    # Each failing test with the lines it logged (indented under it), so
    # that CI's output says what failed, not only which test.
    awk '/^(--- FAIL|FAIL)|panic:/ { keep = 1; print; next }
         /^    / && keep { print; next }
         { keep = 0 }' "$log" | sed 's/^/    /' | head -n 60
    failed+=("$version")
  fi
done < <(printf '%s\n' "${found[@]}" | sort -t. -k1,1n -k2,2n -k3,3n)

echo "test-pythons: ${#passed[@]} passed${passed:+ (${passed[*]})}, ${#failed[@]} failed${failed:+ (${failed[*]})}, ${#skipped[@]} skipped${skipped:+ (${skipped[*]})} in $((SECONDS - start))s"
[ ${#failed[@]} -eq 0 ]
