#!/usr/bin/env bash
# ThreadSanitizer over the host twin: a reduced set of the twin's protocol tests, built
# with -Zsanitizer=thread, fails on any data race it reports (docs/testing.md,
# "ThreadSanitizer" says what it covers, what it cannot see, and what it found). Needs
# the nightly toolchain of rust-toolchain.toml with rust-src (-Zbuild-std builds std with
# the sanitizer). Builds into target/tsan; the twin's tests need no SASS, so the build
# script is given FERROCCL_PTXAS=none unless FERROCCL_PTXAS is set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

host=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Zsanitizer=thread"
export FERROCCL_PTXAS="${FERROCCL_PTXAS:-none}"
# A report ends the run as a failure (exit code 66 from the test binary) once the test
# binary has run every test it was given; backtraces of the tests' own expected panics
# are not needed here.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0}"
export RUST_BACKTRACE=0
tsan=(test -Zbuild-std --target "$host" --target-dir "$root/target/tsan")

echo "== tests/tsan.sh: build $(date -u +%T)"
cargo "${tsan[@]}" --no-run -p device-rt --features host-emu --test host_twin --test prims_host
cargo "${tsan[@]}" --no-run -p ferroccl-tests --test shot_host --test call_kernel_host --test work_loop_host --test shmem_host

echo "== tests/tsan.sh: run $(date -u +%T)"
# The arch layer's shared words, barriers, atomics and message passing; every primitives
# test (a stop racing seven polls, the FIFO, direct operations, weak memory).
cargo "${tsan[@]}" -p device-rt --features host-emu --test host_twin -- shared_words barrier atomics message_passing
cargo "${tsan[@]}" -p device-rt --features host-emu --test prims_host
# A one-shot/two-shot collective whose waits time out (the shot's stop racing its polls);
# LL calls whose waits stop (LL's stop) and call channels whose peers never come (the
# primitives' stop); the work loop's ring, mailbox, abort and budget on few ranks; the
# symmetric heap.
cargo "${tsan[@]}" -p ferroccl-tests --test shot_host -- a_rank_that_never_arrives
cargo "${tsan[@]}" -p ferroccl-tests --test call_kernel_host -- ll_calls_whose_ranks_disagree a_peer_whose_call_channels_never_come
cargo "${tsan[@]}" -p ferroccl-tests --test work_loop_host -- --skip submissions_after_the_loop_closed
cargo "${tsan[@]}" -p ferroccl-tests --test shmem_host
echo "== tests/tsan.sh: done $(date -u +%T)"
