"""Downstream evaluation: `tasks` (the paper's 12 datasets and the offline stand-ins, by name; `catalog`,
`paper_suite` and `offline_suite` build them), `grid` (a grid's runs and what is done, torch-free), `checkpoint`
(opening any checkpoint), `groups` (each task group's encoding, batches, loss and scores), `finetune` (the protocol
over lr x seed grids), `workers` (a grid's runs on forked processes), `metrics`.
"""
