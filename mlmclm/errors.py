"""Every error a user can cause, under one base class.

The command line prints an `MlmClmError` as one line (`mlmclm: error: ...`) and exits with status 2; every other
exception is a bug and keeps its traceback. A message names what is wrong and how to fix it. The classes also derive
from the built-in type a caller would expect (`ValueError` for bad input, `RuntimeError` for a failed operation).
"""


class MlmClmError(Exception):
    """Base class of every error a user can cause (bad input, a missing tool, a diverged run)."""


class ConfigError(MlmClmError, ValueError):
    """A bad config, size, scale, objective or backend: the message names the field and what to do."""


class TaskError(MlmClmError, ValueError):
    """Bad task input (unknown dataset, unbuilt suite, labels out of range)."""


class FinetuneError(MlmClmError, ValueError):
    """Bad fine-tuning input (not a checkpoint, a head that does not fit the task)."""


class ConversionError(MlmClmError, ValueError):
    """A transformers model that cannot be converted to or from mlmclm (an unsupported feature or class)."""


class ResultFileError(MlmClmError, ValueError):
    """A result file or model id that cannot be read: the message names the file and what is wrong."""


class FetchError(MlmClmError, RuntimeError):
    """A package could not be fetched: the message names the package and the tool."""


class NonFiniteLoss(MlmClmError, RuntimeError):
    """Pretraining produced a non-finite loss: the message names the step (lower the learning rate, resume)."""


class NotebookError(MlmClmError, RuntimeError):
    """A notebook whose execution failed: the message names the notebook, the cell and the error."""
