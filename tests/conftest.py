import os

import pytest

import helpers

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def free_port() -> int:
    """A TCP port free on this machine now (`helpers.free_port`)."""
    return helpers.free_port()
