#!/usr/bin/env bash
# Fine-tuning calibration for SC and IR at the long scale (issue 26). Models: the long scale's final CLM and MLM-40%
# mini-xs runs (pretraining seed 0, 4,620 steps of 32 x 64 = 9.5M tokens, 51 tokens per body parameter), retrained
# from their committed configs (results/runs/long/<run>/config.yaml) into results/calibration/long/<run>/ and
# checkpoints/calibration/long/<run>/, and the random-init control (the MLM-40% run's step-0 checkpoint,
# mini-xs-mlm40-4620-0). Each protocol is a folder <name>/long/<model>/<group>/<dataset>/lr{LR}_sd{SEED}/results.json
# (the long scale's fine-tuning defaults: batch 16, max_length 64, validation after every epoch; the rest named by
# the folder: e<epochs>-n<training examples>). Resumable: re-run it and it skips what is complete.
# Run from the repository root:  bash scripts/calibration/long/run.sh   (summary: scripts/calibration/summarize.py long)
set -euo pipefail
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false
PY=${PY:-.venv/bin/python}
M="$PY -m mlmclm.cli"
OUT=results/calibration/long
CK=checkpoints/calibration/long
for run in mini-xs-clm-4620 mini-xs-mlm40-4620; do
  $M pretrain results/runs/long/$run/config.yaml results_dir=results/calibration checkpoints_dir=checkpoints/calibration
done
$M tasks build
C=$CK/mini-xs-clm-4620/step_004620; L=$CK/mini-xs-mlm40-4620/step_004620; R=$CK/mini-xs-mlm40-4620/step_000000
ft() {  # ft FOLDER GROUPS DATASETS LRS SEEDS EPOCHS TRAIN EVAL: one grid on each model (MODELS: a subset, e.g. "R")
  for m in ${MODELS:-R C L}; do
    case $m in R) dir=$R id=mini-xs-mlm40-4620-0 ;; C) dir=$C id=mini-xs-clm-4620 ;; L) dir=$L id=mini-xs-mlm40-4620 ;; esac
    $M finetune "$dir" --scale long --model-id "$id" --groups "$2" --datasets "$3" --lrs "$4" --seeds "$5" \
      --runs-dir $OUT/$1 --set epochs=$6 --set max_train=$7 --set max_eval=$8 --set grid_workers=${WORKERS:-0}
  done
}
# IR: trained on squad_retrieval, evaluated on it and zero-shot on nq_retrieval and vitaminc_retrieval; the grid of
# the probe (5e-4 .. 1.5e-2: random init chose the low edge) moved down half a decade
ft ir-e4-n2048 IR squad_retrieval,nq_retrieval,vitaminc_retrieval 1.5e-4,5e-4,1.5e-3,5e-3 0,1 4 2048 1000
# SC, a first look at the dataset not yet tried (BBC topics), 2 seeds
ft sc-bbc-e4-n2048 SC bbc_news_topic 5e-4,1.5e-3,5e-3,1.5e-2 0,1 4 2048 4000
# SC with few labels, where pretraining should matter most: 256 BBC articles seen 8 times (128 steps)
ft sc-bbc-e8-n256 SC bbc_news_topic 1.5e-3,5e-3,1.5e-2 0,1,2,3 8 256 4000
