"""mlmclm: companion code of "Should We Still Pretrain Encoders with Masked Language Modeling?" (arXiv 2507.00994)."""

__version__ = "0.1.0"
