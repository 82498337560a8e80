#!/usr/bin/env bash
# Runs every test: installs the interop peers the tests need (the official A2A
# Python SDK in .venv-interop), then the whole cargo test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-interop
if ! "$venv/bin/python" -c 'import a2a.client' 2>/dev/null; then
  echo "== installing interop peers into $venv (a2a-sdk from PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "a2a-sdk==1.3.0"
fi
export WARDEN_INTEROP_PYTHON="$PWD/$venv/bin/python"

cargo test --workspace --locked "$@"
