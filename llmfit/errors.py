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
EXIT_HUB = 4  # the Hub could not be asked: unreachable, a server error, or offline and not cached
# The Hub answered, and the answer is one a script may want to tell apart (issue 5): each its own.
EXIT_REPO_NOT_FOUND = 5
EXIT_GATED = 6
EXIT_UNAUTHORIZED = 7
EXIT_REVISION_NOT_FOUND = 8
EXIT_TIMEOUT = 9
# Not the input's doing: a bug in llmfit. The CLI's last net turns it into one sentence.
EXIT_INTERNAL = 10
# What llmfit printed could not be written: stdout or stderr failed (a full disk, an I/O error).
# Not "nothing fits" (1) nor a bug (10): a script must not read half a plan as a whole one.
EXIT_OUTPUT = 11
# `llmfit check` with a named load: the command fits, but one server of it does not serve that
# load within its targets (issue 34): a script tells "runs, too slow" from "does not run" (1).
EXIT_NOT_SERVED = 12


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


class UnprintableCommand(UsageError):
    """A command (or YAML) whose words cannot be printed exactly: a word holds a character a
    terminal acts on or would not show as itself, or one the output's encoding cannot write.
    Printing it changed would name another file or run another command, so it is not printed."""


class BadInputError(LlmfitError):
    """A file we were given (config, index, header, fleet) that we cannot read as what it claims."""

    exit_code = EXIT_BAD_INPUT


class ConfigError(BadInputError):
    """config.json is missing, not JSON, or lacks what sizing the model needs."""


class WeightsError(BadInputError):
    """The weights' index or headers are missing or malformed."""


class FleetFileError(BadInputError):
    """The fleet file does not parse or says something impossible."""


class CacheDamaged(BadInputError):
    """A cache on disk (Hugging Face's or llmfit's) is not as its owner writes it: a link to a
    blob that is gone, a ref that names no commit, a file that leads outside it."""


class RepoNotFound(LlmfitError):
    """The repository is neither a local directory nor in the cache (nor, online, on the Hub)."""

    exit_code = EXIT_HUB


class HubError(LlmfitError):
    """The Hub could not give what the plan needs: unreachable, or it answered with an error."""

    exit_code = EXIT_HUB


class CacheUnusable(HubError):
    """The Hugging Face cache cannot be read or written (permissions, a full disk): the
    repository cannot be had, as when the Hub cannot be asked."""


class HubUnreachable(HubError):
    """No answer from the Hub: no route, refused, dropped, or a server error."""


class HubTimeout(HubUnreachable):
    """The Hub did not answer within the timeout."""

    exit_code = EXIT_TIMEOUT


class HubRepoNotFound(RepoNotFound):
    """The Hub has no such repository (or it is private and the token cannot see it)."""

    exit_code = EXIT_REPO_NOT_FOUND


class GatedRepo(HubError):
    """The repository is gated and its licence has not been accepted by this account."""

    exit_code = EXIT_GATED


class Unauthorized(HubError):
    """The Hub refused the token: invalid, expired, or without permission."""

    exit_code = EXIT_UNAUTHORIZED


class RevisionNotFound(HubError):
    """The repository exists but has no such branch, tag or commit."""

    exit_code = EXIT_REVISION_NOT_FOUND
