"""Downstream evaluation: `tasks` (the paper's 12 datasets and the offline stand-ins, by name), `offline_suite`
(building the stand-ins from registry packages), `finetune` (the protocol over lr x seed grids), `metrics`.
"""
