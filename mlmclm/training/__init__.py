"""Pretraining: `objectives` (MLM masking, next-token labels, the phase schedule), `corpus` (text -> tokenizer ->
uint32 shards), `pretrain` (the accelerate loop), `checkpoints` (the step-folder layout: find, prune, read, complete).
"""
