#!/bin/sh
# Profiling aid: interleaved in-process passes (bench/proto/pass-only.mjs) of several trees'
# dist/ (each with bench/proto/pass-only.mjs copied in), N rounds, pinned to one core.
N=${N:-4}
for i in $(seq $N); do
  for t in "$@"; do printf '%-22s ' "$t"; taskset -c 1 node $t/bench/proto/pass-only.mjs; done
done
