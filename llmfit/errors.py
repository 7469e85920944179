"""The errors a user can cause, each carrying the sentence that explains it and the exit code.

Every failure that comes from input (a repository, a config, a fleet file, the network) is one of
these, raised where the input is read, and printed once by the CLI: one sentence, an optional hint
that is the next command to type, and an exit code a script can tell apart from the others.
"""

from __future__ import annotations

# Exit codes, documented in README.md. A script can tell "nothing fits" (a refusal) from a failure.
EXIT_FITS = 0
EXIT_NOTHING_FITS = 1
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_HUB = 4


class LlmfitError(Exception):
    """An error the user can act on: a message, a hint, and the exit code it earns."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(LlmfitError):
    """An argument the command line cannot use."""

    exit_code = EXIT_USAGE


class BadInputError(LlmfitError):
    """A file we were given (config, index, header, fleet) that we cannot read as what it claims."""

    exit_code = EXIT_BAD_INPUT


class ConfigError(BadInputError):
    """config.json is missing, not JSON, or lacks what sizing the model needs."""


class WeightsError(BadInputError):
    """The weights' index or headers are missing or malformed."""


class FleetFileError(BadInputError):
    """The fleet file does not parse or says something impossible."""


class RepoNotFound(LlmfitError):
    """The repository is neither a local directory nor in the cache (nor, online, on the Hub)."""

    exit_code = EXIT_HUB
