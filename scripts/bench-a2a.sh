#!/usr/bin/env bash
# Runs `warden-bench a2a`: warden vs the official Rust and Python A2A SDK servers.
# Sets up what the peers need (a Python venv with a2a-sdk[http-server]; the Rust
# SDK peer is built by the benchmark itself), then passes its arguments on.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-bench/bin/python ] || ! .venv-bench/bin/python -c 'import a2a.server, uvicorn' 2>/dev/null; then
    echo "setting up .venv-bench (a2a-sdk[http-server]==1.3.0, uvicorn)…" >&2
    python3 -m venv .venv-bench
    .venv-bench/bin/pip install --quiet 'a2a-sdk[http-server]==1.3.0' uvicorn
fi
cargo build --release --locked -p warden -p warden-bench
exec ./target/release/warden-bench a2a "$@"
