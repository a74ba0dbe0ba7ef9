"""One error base class carrying the process exit code; subclasses per kind of failure."""
from __future__ import annotations

import difflib


class AdcompareError(Exception):
    """Base of every error adcompare raises on purpose; the CLI prints it as one line and exits with `exit_code`."""

    exit_code = 1


class UsageError(AdcompareError):
    """The user asked for something that does not exist or does not fit (exit 2)."""

    exit_code = 2


class ProblemDefinitionError(UsageError):
    """A problem definition is invalid; raised when it is declared or registered."""


class UnknownNameError(UsageError):
    """A name (problem, adapter, operator, …) matched nothing; the message suggests the closest one."""


class ResultsFileError(UsageError):
    """A file is not adcompare results, or has a schema this version cannot read."""


class EnvironmentSetupError(UsageError):
    """An `--env` option is malformed, or its environment cannot be built (a requirement fails to install)."""


class PluginError(UsageError):
    """A plugin named with --plugin could not be loaded (no such file or module, its import or hook raised): the
    user asked for it, so the command stops (exit 2). A failing entry-point plugin is not raised but recorded as
    broken (plugins.BrokenPlugin), and the rest keep working."""


class Interrupted(AdcompareError):
    """The user pressed Ctrl-C while cells ran; the message says where the finished ones are (exit 130, as for
    SIGINT)."""

    exit_code = 130


class Terminated(Interrupted):
    """SIGTERM (a scheduler's time limit, `kill`) while cells ran, handled as Ctrl-C is (exit 143, as for SIGTERM)."""

    exit_code = 143


class SigtermReceived(KeyboardInterrupt):
    """SIGTERM (a scheduler's time limit, `kill`), raised where Ctrl-C would be (cli/pipeline.sigterm_as_interrupt):
    what finished is written first, then it becomes Terminated."""


class SchedulerError(AdcompareError):
    """The scheduler refused or could not be reached (e.g. sbatch failed); nothing of the study was lost."""


class RequiredFrameworkMissing(AdcompareError):
    """ADCOMPARE_REQUIRE names a framework that is not installed or not usable."""


class UnsupportedOperation(AdcompareError):
    """An adapter was asked for an operator/variant/device it declared unsupported; the message is the reason."""


class CellFailure(AdcompareError):
    """A cell failed in a way the adapter recognised (e.g. a graph break under a compiler)."""


def closest(name: str, candidates) -> str:
    """A ' (did you mean X?)' suffix for unknown-name messages, or '' when nothing is close."""
    match = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.5)
    return f" (did you mean {match[0]!r}?)" if match else ""


def unknown(kind: str, name: str, candidates, hint: str = "") -> UnknownNameError:
    """`hint`, when given, says how to get what was asked for another way; it comes before the (long) valid list."""
    candidates = sorted(candidates)
    return UnknownNameError(
        f"unknown {kind} {name!r}{closest(name, candidates)}{'; ' + hint if hint else ''}; valid: "
        f"{', '.join(candidates) or 'none'}"
    )
