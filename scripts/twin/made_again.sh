#!/usr/bin/env bash
# The twin's runs made again for their fine-tuning (issue 60). Fine-tuning reads a run's checkpoints, which are not
# stored with its results; when the machine that held them is replaced before every model of the run is fine-tuned,
# the run is trained again from its config (its seed, its data order) into a runs folder outside the repository
# ($RETRAIN), so that the run folders in results/runs/twin stay the originals'. Its checkpoints go to checkpoints/twin,
# as any run's, and each model is fine-tuned as soon as its run is made: what its grid still misses (for seeds 0, 1
# and 2 SC alone, under SC's settled protocol; for seed 5 every group). results/runs/twin/README.md compares each run
# made again with the committed one. Resumable: re-run it and it skips what is complete; a model whose checkpoint is
# not on disk is skipped with a line, never trained again into results/runs.
# Run from the repository root, one seed list a lane (one torch thread each):
#   bash scripts/twin/made_again.sh 5 1 &   bash scripts/twin/made_again.sh 0 2 &
set -uo pipefail
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
M="${PY:-.venv/bin/python} -m mlmclm.cli"
RETRAIN=${RETRAIN:-../retrain/runs}

pre() {  # pre MODEL...: train the runs these models need into $RETRAIN, keeping their checkpoints
  echo "== pretrain $* $(date -u +%H:%M)"
  $M study run all --scale twin --runs-dir "$RETRAIN" --pretrain-only $(printf -- '--model %s ' "$@")
}
adopt() {  # adopt RUN...: a new run (issue 61's switches) trained beside the runs made again, complete in $RETRAIN and
           # without a folder in results/runs/twin, gets its folder copied there, as if trained there (checkpoints in place)
  for r in "$@"; do
    if [ ! -e "results/runs/twin/$r" ] && grep -qs '"status": "complete"' "$RETRAIN/twin/$r/meta.json"; then
      cp -r "$RETRAIN/twin/$r" results/runs/twin/ && echo "== $r: a new run, its folder copied into results/runs/twin"
    fi
  done
}
ft() {  # ft MODEL: fine-tune what its grid misses, only where its checkpoint is on disk
  if $M study plan all --scale twin --model "$1" 2>&1 | grep -q "to retrain"; then
    echo "== $1: its checkpoint is not on disk (its run failed?); skipped"; return
  fi
  echo "== finetune $1 $(date -u +%H:%M)"
  $M study run all --scale twin --model "$1"
}
seed() {  # seed S: the five runs of claim seed S (0, 1, 2 or 5), each model fine-tuned once made
  local s=$1 p="-p$1" ck="2500 5000 10000" c m more_c="" more_m="" fts
  [ "$s" = 0 ] && p="" && ck="$ck 500 1000"
  c=twin-clm-21k$p m=twin-mlm40-21k$p
  case $s in
    0) more_c="$c-20000" more_m="$m-0 $m-20000" ;;                        # the 40K checkpoints; the random-init control
    1|2) more_c=$(printf "twin-clm-20k-mlm%s-21k$p " 20 30 40 50) ;;      # issue 61's switches: they start at 20,000
  esac
  fts=$ck; [ "$s" = 5 ] && fts=""                                          # seed 5's checkpoints: kept, not fine-tuned yet
  pre $c $(printf "$c-%s " $ck) $more_c
  [ "$s" = 1 ] || [ "$s" = 2 ] && adopt $more_c
  ft $c
  pre $m $(printf "$m-%s " $ck) $more_m
  ft $m
  [ "$s" = 0 ] && ft $m-0
  pre twin-clm-5k-mlm40-21k$p && ft twin-clm-5k-mlm40-21k$p
  pre twin-clm-dec21k-mlm40-27k$p twin-mlm40-dec21k-mlm40-27k$p
  ft twin-clm-dec21k-mlm40-27k$p
  ft twin-mlm40-dec21k-mlm40-27k$p
  for x in $fts; do ft $c-$x; ft $m-$x; done
}
for s in "$@"; do
  case $s in 0|1|2|5) seed "$s" ;; *) echo "made_again.sh: seed $s has no runs to make again (0, 1, 2 or 5)" >&2; exit 2 ;; esac
done
