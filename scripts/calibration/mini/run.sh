#!/usr/bin/env bash
# Fine-tuning calibration at the mini scale (issue: evidence that holds). Pretrains mini-m CLM and MLM-40% for
# 2,100 steps of the mini template (checkpoints at 10, 420 and the decayed 2,100), builds a random-init model, then
# fine-tunes them on five offline datasets over 4 learning rates x 2 seeds at 384 steps of 16 (18,432 training
# examples, 1,000 validation and test examples), and on the two main datasets at 128 steps (3 learning rates) and
# 1,152 steps (the 2 best at 384) too, to see where validation plateaus. One torch thread, resumable: re-run it and it skips what is complete.
# Ran at commit f76ec9b (before the package moved into four rooms; its recipes were then in mlmclm/configs/).
# Run from the repository root:  bash scripts/calibration/mini/run.sh   (summary: scripts/calibration/mini/summarize.py)
set -euo pipefail
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false
M=".venv/bin/python -m mlmclm.cli"   # the code of the checkout it runs in (cwd first on sys.path)
OUT=results/calibration/mini
CK=checkpoints/calibration/mini
# the mini recipe (at f76ec9b, when it ran, the file mlmclm/configs/mini.yaml; a recipe name since)
RECIPE=mini
for obj in clm mlm40; do
  $M pretrain $RECIPE run_id=mini-m-$obj-2100 "phases=[[$obj, 2100]]" \
    results_dir=results/calibration checkpoints_dir=checkpoints/calibration "checkpoint.steps=[10, 420]" optim.warmup_steps=100 optim.decay_steps=100
done
if [ ! -f $CK/mini-m-random/config.json ]; then
  .venv/bin/python - <<'PY'
import torch, mlmclm
from transformers import AutoTokenizer
src = "checkpoints/calibration/mini/mini-m-mlm40-2100/step_000010/hf"
cfg = mlmclm.MlmClmConfig.from_pretrained(src)
torch.manual_seed(0)
model = mlmclm.MlmClmForMaskedLM(cfg)
model.save_pretrained("checkpoints/calibration/mini/mini-m-random")
AutoTokenizer.from_pretrained(src).save_pretrained("checkpoints/calibration/mini/mini-m-random")
PY
fi
ft() {  # ft STEPS MODEL_DIR MODEL_ID DATASETS [LRS]
  $M finetune "$2" --scale mini --model-id "$3" --datasets "$4" --lrs ${5:-3e-4,1e-3,3e-3,1e-2} --seeds ${SEEDS:-0,1} \
    --runs-dir $OUT/finetune-$1 --set max_steps=$1 --set max_train=18432 --set max_eval=1000 --set grid_workers=1
}
MAIN=multiemo_sentiment,brown_upos
MORE=vitaminc_nli,brown_propn_spans,squad_retrieval
C=$CK/mini-m-clm-2100; L=$CK/mini-m-mlm40-2100
ft 384 $C/step_002100 mini-m-clm-2100 $MAIN
ft 384 $L/step_002100 mini-m-mlm40-2100 $MAIN
ft 384 $CK/mini-m-random mini-m-random $MAIN
ft 384 $L/step_000010 mini-m-mlm40-2100-10 $MAIN
# the step ladder (where validation plateaus): 128 steps on three learning rates, 1,152 steps on the two best at 384
for s in 128 1152; do
  lrs=$([ $s = 128 ] && echo 1e-3,3e-3,1e-2 || echo 1e-3,3e-3)
  ft $s $C/step_002100 mini-m-clm-2100 $MAIN $lrs
  ft $s $L/step_002100 mini-m-mlm40-2100 $MAIN $lrs
  ft $s $CK/mini-m-random mini-m-random $MAIN $lrs
done
ft 384 $C/step_000420 mini-m-clm-2100-420 $MAIN
ft 384 $L/step_000420 mini-m-mlm40-2100-420 $MAIN
ft 384 $C/step_002100 mini-m-clm-2100 $MORE
ft 384 $L/step_002100 mini-m-mlm40-2100 $MORE
ft 384 $CK/mini-m-random mini-m-random $MORE
# The mini scale's own models (840 steps; after `mlmclm study run all --scale mini`, whose 384-step results are in
# results/runs/mini) at 1,152 fine-tuning steps, seed 0, the two best learning rates: does validation still rise?
M8=checkpoints/mini
if [ -d $M8/mini-m-clm-840 ]; then
  SEEDS=0 ft 1152 $M8/mini-m-clm-840/step_000840 mini-m-clm-840 $MAIN 1e-3,3e-3
  SEEDS=0 ft 1152 $M8/mini-m-mlm40-840/step_000840 mini-m-mlm40-840 $MAIN 1e-3,3e-3
  SEEDS=0 ft 1152 $M8/mini-m-mlm40-840/step_000000 mini-m-mlm40-840-0 $MAIN 1e-3,3e-3
fi
# Low-data, several epochs (calibration of the evidence issue, second round): 2,048 training examples seen 4 times
# (512 steps of 16), validation after every epoch (results.json validation.curve). Does validation plateau within
# the steps the hour affords, and does pretraining separate from random init more than with 18,432 examples once?
ft_e() {  # ft_e EPOCHS TRAIN MODEL_DIR MODEL_ID DATASETS [LRS]
  $M finetune "$3" --scale mini --model-id "$4" --datasets "$5" --lrs ${6:-1e-3,3e-3,1e-2} --seeds ${SEEDS:-0,1} \
    --runs-dir $OUT/finetune-e$1-n$2 --set max_steps=-1 --set epochs=$1 --set max_train=$2 --set max_eval=1000 \
    --set grid_workers=${WORKERS:-2}
}
ft_e 4 2048 $C/step_002100 mini-m-clm-2100 $MAIN
ft_e 4 2048 $L/step_002100 mini-m-mlm40-2100 $MAIN
ft_e 4 2048 $CK/mini-m-random mini-m-random $MAIN
