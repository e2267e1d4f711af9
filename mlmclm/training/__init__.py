"""Pretraining: `objectives` (MLM masking, next-token labels, the phase schedule), `corpus` (the text a run reads)
-> `tokenizer` -> `shards` (uint32 token streams and their blocks), `pretrain` (the accelerate loop), `ownership` (a
run's claim on its folders), `checkpoints` (the step-folder layout: find, prune, read, complete).
"""
