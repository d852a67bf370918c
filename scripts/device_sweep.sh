#!/usr/bin/env bash
# One device call for several topics: correctness at the smallest shapes, the
# headline shapes, then the full sweep, then compute-sanitizer memcheck.
# Each stage has its own time limit; the results file is copied to $OUT at exit.
#
#   bash scripts/device_sweep.sh 'gemm/*' 'softmax/*' 'layernorm/*' 'rmsnorm/*'
set -uo pipefail
OUT=${OUT:-/tmp/sweep-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
trap 'cp kernels/results/*.json "$OUT/" 2>/dev/null' EXIT

if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 3
fi
export PYTHONPATH=/tmp/site:$PWD/src
BENCH=(python3 -m curriculum.bench --root "$PWD")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$OUT/env.txt" 2>&1

stage() {  # stage NAME SECONDS ARGS...
    local name=$1 limit=$2; shift 2
    local start=$SECONDS
    for topic in "${TOPICS[@]}"; do
        timeout "$limit" "${BENCH[@]}" --only "$topic" "$@" >>"$OUT/$name.log" 2>&1
        echo "$name $topic: exit $?, $((SECONDS - start)) s" | tee -a "$OUT/stages.log"
    done
}

TOPICS=("$@")
STAGES=${STAGES:-"check headline sweep memcheck"}
[[ $STAGES == *check* ]] && stage check 45 --small --check-only
[[ $STAGES == *headline* ]] && stage headline 100 --headline --time-cap 5
[[ $STAGES == *sweep* ]] && stage sweep 120 --time-cap 3
if [[ $STAGES == *memcheck* ]] && command -v compute-sanitizer >/dev/null; then
    for topic in "${TOPICS[@]}"; do
        timeout 120 compute-sanitizer --tool memcheck --print-limit 10 \
            "${BENCH[@]}" --only "$topic" --small --check-only >"$OUT/memcheck-${topic%%/*}.log" 2>&1
        echo "memcheck $topic: exit $?; $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-${topic%%/*}.log" | tail -1)" \
            | tee -a "$OUT/stages.log"
    done
fi
