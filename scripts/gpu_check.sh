#!/usr/bin/env bash
# GPU checks on a CUDA machine, through the paths a user runs: the Llama FoNE + LoRA recipe in bf16 (train, eval,
# export) on a toy Llama built here, in each of GPU_CHECK_MODES (all: every number a [NUM], as the recipe says;
# auto: the library's default numbers; answers: numbers in digits with products and digit answers; pointer: the
# pointer head over the last 16 numbers), DeepSpeed ZeRO-2 / ZeRO-3 on one GPU against the same run without
# DeepSpeed (with GPU_CHECK_ZERO=1), the quick start's toy run, and the speed benchmarks on cuda. Nothing is
# downloaded.
#
# Run from the repository root: bash scripts/gpu_check.sh OUT_DIR
# Python packages the machine lacks can come as wheels in .whl/ (installed into /tmp/site first).
set -uo pipefail
out=${1:-/tmp/gpu_check}
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -c "import torch, transformers, peft, trl; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'peft', peft.__version__, 'trl', trl.__version__, torch.cuda.get_device_name(0))" || exit 1

# a toy Llama (width 64, 2 layers), pretrained here for a few seconds
python3 - "$out/base" <<'EOF' || exit 1
import sys
from numadapter.testing.tiny_base import FULL, build_tiny_base
build_tiny_base(sys.argv[1], FULL, 0, print)
EOF

status=0
for mode in ${GPU_CHECK_MODES:-all answers}; do
    run="$out/run-$mode"
    numbers=$mode
    extra=()
    if [ "$mode" = answers ]; then extra=(adapter.fone_context_products=true adapter.fone_digit_answers=0.5); fi
    if [ "$mode" = pointer ]; then
        numbers=auto
        extra=(adapter.fone_context_pointer=true adapter.fone_context_numbers=16 adapter.fone_context_products=false)
    fi
    args=(model.name_or_path="$out/base" model.dtype=bfloat16 adapter.fone_numbers=$numbers "${extra[@]}"
          adapter.int_digits=6 adapter.frac_digits=0 data.synthetic_examples=8000 data.synthetic_max_digits=4
          training.output_dir="$run" training.max_steps=300 training.learning_rate=1e-3 training.bf16=true
          training.save_steps=1000 training.logging_steps=50 export.out_dir="$run/merged" eval.max_examples=200)
    echo "== recipe llama/fone_lora.yaml, $mode: fone_numbers=$numbers ${extra[*]}"
    python3 -m numadapter.app.cli train --config recipes/llama/fone_lora.yaml "${args[@]}" 2>&1 | tail -n 25 \
        || status=1
    python3 -m numadapter.app.cli eval --config recipes/llama/fone_lora.yaml "${args[@]}" 2>&1 | tail -n 8 \
        || status=1
    python3 -m numadapter.app.cli eval --config recipes/llama/fone_lora.yaml --exported "$run/merged" "${args[@]}" \
        2>&1 | tail -n 8 || status=1
done

if [ -n "${GPU_CHECK_ZERO:-}" ]; then
    # a 2-layer Llama, one process each: without DeepSpeed, ZeRO-2, ZeRO-3 (nccl); the loss curves must agree
    PYTHONPATH="$PYTHONPATH:$PWD/tests" python3 -c "import sys; from pathlib import Path; \
from helpers.launching import tiny_base; tiny_base(Path(sys.argv[1]))" "$out/zero" || status=1
    for stage in none zero2 zero3; do
        ds=()
        [ "$stage" != none ] && ds=(--deepspeed "recipes/accelerate/deepspeed/$stage.json")
        echo "== tests/dist_scripts/train_tiny.py on cuda, $stage"
        python3 -m torch.distributed.run --nproc_per_node 1 tests/dist_scripts/train_tiny.py --steps 6 \
            --base "$out/zero/base" --out "$out/zero/$stage" "${ds[@]}" 2>&1 | tail -n 4 || status=1
    done
    python3 - "$out/zero" <<'PY' || status=1
import json, sys
runs = {s: json.load(open(f"{sys.argv[1]}/{s}/rank0.json")) for s in ("none", "zero2", "zero3")}
for stage, record in runs.items():
    print(stage, record["distributed_type"], "zero stage", record["zero_stage"], "losses",
          [round(x, 5) for x in record["local_losses"]])
for stage in ("zero2", "zero3"):
    gap = max(abs(a - b) for a, b in zip(runs["none"]["local_losses"], runs[stage]["local_losses"]))
    print(f"{stage}: largest loss difference from the run without DeepSpeed {gap:.2e}")
    assert len(runs[stage]["local_losses"]) == len(runs["none"]["local_losses"]) and gap < 1e-3, stage
PY
fi

echo "== quick start (toy base) on cuda"
python3 -m numadapter.app.cli quickstart --tiny 2>&1 | tail -n 12 || status=1

[ -n "${GPU_CHECK_NO_BENCH:-}" ] && exit $status
echo "== speed benchmarks on cuda"
python3 -m eval_harness.bench --device cuda --only train_step,generate_speed --quick --out "$out/bench" 2>&1 \
    | tail -n 30 || status=1
exit $status
