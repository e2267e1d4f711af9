#!/usr/bin/env bash
# Fine-tuning calibration for SC and IR at the longer scale (issue 26). Models: the scale's own seed-0 base runs,
# trained by `mlmclm study run all --scale longer` (mini-xs, 9,240 steps of 32 x 64 = 18.9M tokens, 102 tokens per
# body parameter): the final CLM and MLM-40% checkpoints and the random-init control (the MLM-40% run's step-0
# checkpoint, mini-xs-mlm40-9240-0). Each protocol is a folder <name>/longer/<model>/<group>/<dataset>/lr{LR}_sd{SEED}/
# results.json (the scale's fine-tuning defaults: batch 16, max_length 64, validation after every epoch; the rest
# named by the folder: e<epochs>-n<training examples>). Resumable: re-run it and it skips what is complete.
# Run from the repository root:  bash scripts/calibration/longer/run.sh [PROTOCOL ...]   (summary: scripts/calibration/summarize.py longer)
set -euo pipefail
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false
PY=${PY:-.venv/bin/python}
M="$PY -m mlmclm.cli"
OUT=results/calibration/longer
CK=${CK:-checkpoints/longer}
C=$CK/mini-xs-clm-9240/step_009240; L=$CK/mini-xs-mlm40-9240/step_009240; R=$CK/mini-xs-mlm40-9240/step_000000
ft() {  # ft FOLDER GROUPS DATASETS LRS SEEDS EPOCHS TRAIN EVAL: one grid on each model (MODELS: a subset, e.g. "C")
  for m in ${MODELS:-C L R}; do
    case $m in R) dir=$R id=mini-xs-mlm40-9240-0 ;; C) dir=$C id=mini-xs-clm-9240 ;; L) dir=$L id=mini-xs-mlm40-9240 ;; esac
    [ -d "$dir" ] || { echo "missing $dir: run 'mlmclm study run all --scale longer --pretrain-only' first" >&2; exit 2; }
    $M finetune "$dir" --scale longer --model-id "$id" --groups "$2" --datasets "$3" --lrs "$4" --seeds "$5" \
      --runs-dir $OUT/$1 --set epochs=$6 --set max_train=$7 --set max_eval=$8 --set grid_workers=${WORKERS:-0}
  done
}
protocol() {
  case $1 in
    # IR: trained on squad_retrieval, evaluated on it and zero-shot on nq_retrieval and vitaminc_retrieval; long's
    # calibration grid (1.5e-4 .. 5e-3, where the random-init control chose the lowest rate every time) extended down
    ir) ft ir-e4-n2048 IR squad_retrieval,nq_retrieval,vitaminc_retrieval 1.5e-5,5e-5,1.5e-4,5e-4,1.5e-3,5e-3 0,1,2,3 4 2048 1000 ;;
    # SC: sentiment (4 classes) and fact verification (3 classes), 2,048 labelled examples seen 4 times, 4,000 test
    multiemo) ft sc-multiemo-e4-n2048 SC multiemo_sentiment 5e-4,1.5e-3,5e-3 0,1,2,3 4 2048 4000 ;;
    vitaminc) ft sc-vitaminc-e4-n2048 SC vitaminc_nli 5e-4,1.5e-3,5e-3 0,1,2,3 4 2048 4000 ;;
    # SC with more labelled data: 8,192 reviews seen twice (1,024 steps)
    multiemo-big) ft sc-multiemo-e2-n8192 SC multiemo_sentiment 5e-4,1.5e-3,5e-3 0,1,2,3 2 8192 4000 ;;
    # ... seen 4 times, the grid widened upwards (at 2 epochs validation still rose and MLM-40% chose the top rate)
    multiemo-big4) ft sc-multiemo-e4-n8192 SC multiemo_sentiment 5e-4,1.5e-3,5e-3,1.5e-2 0,1,2,3 4 8192 4000 ;;
    *) echo "unknown protocol $1 (ir, multiemo, vitaminc, multiemo-big, multiemo-big4)" >&2; exit 2 ;;
  esac
}
[ $# -gt 0 ] || set -- ir multiemo vitaminc
for p in "$@"; do protocol "$p"; done
