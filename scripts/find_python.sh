#!/usr/bin/env bash
# Prints the path of a Python >= 3.12 interpreter on this machine, or exits 1 with advice.
# Order: $PYTHON, python3.13/python3.12 on PATH, python3, then pyenv-installed versions
# (pyenv's python3.12 shim fails while its global version is older, so we look in its folder directly).
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
cands=()
[ -n "${PYTHON:-}" ] && cands+=("$PYTHON")
cands+=(python3.13 python3.12 python3)
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root 2>/dev/null)
  for d in "$root"/versions/3.1[2-9]*/bin/python3; do [ -x "$d" ] && cands+=("$d"); done
fi
for c in "${cands[@]}"; do
  p=$(command -v "$c" 2>/dev/null) || continue
  if ok "$p"; then echo "$p"; exit 0; fi
done
echo "memjax needs Python >= 3.12 and none was found (tried: \$PYTHON, python3.13, python3.12, python3, pyenv versions)." >&2
echo "Install one (e.g. 'pyenv install 3.12', 'apt-get install python3.12', or uv python install 3.12) and re-run, or point PYTHON=/path/to/python3.12 at it." >&2
exit 1
