#!/usr/bin/env bash
# Builds the compiled core in place (stream_pairer/_native.abi3.so) for a developer's work tree,
# without `pip install`: several work trees can then share one Python environment, each run with
# PYTHONPATH=<its root>. Thin LTO and parallel codegen: a quicker build than the release profile
# pip/maturin use, the same code. Usage: bash scripts/dev_native.sh [--release]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
if [ "${1:-}" != "--release" ]; then
  export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
fi
cargo build -q --release --manifest-path native/Cargo.toml --features pyo3/extension-module
cp native/target/release/lib_native.so stream_pairer/_native.abi3.so
echo "built stream_pairer/_native.abi3.so"
