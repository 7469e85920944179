"""The `llmfit` group and its last net: one sentence, a hint and an exit code for every error.

The CLI is the only layer that knows argv and exit codes; each command (cli/plan.py, check.py,
models.py, fleet.py) parses its options, calls one library function and hands the result to one
renderer.
"""

from __future__ import annotations

import os
import re
import sys

import click

from llmfit import __version__
from llmfit.errors import EXIT_INTERNAL, EXIT_OUTPUT, LlmfitError
from llmfit.render.safe import clean


class _DefaultGroup(click.Group):
    """`llmfit REPO …` plans; `llmfit <command> …` runs a named command."""

    default = "plan"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            self._unknown_command(ctx, args)
            args = [self.default, *args]
        return super().parse_args(ctx, args)

    def _unknown_command(self, ctx: click.Context, args: list[str]) -> None:
        """Refuse a first word that is a command mistyped, not a repository: `llmfit pln REPO`
        would otherwise plan "pln" and fail on the repository as an extra argument.

        A repository is `org/name` or a directory; a bare word is taken for a command when it is
        close to one, or when more words follow it (a plan takes one repository)."""
        word = args[0]
        if word.startswith("-") or "/" in word or os.path.isdir(word):
            return
        import difflib  # not for `llmfit org/name`: 2 ms to import

        close = difflib.get_close_matches(word, list(self.commands), n=1, cutoff=0.6)
        followed = len(args) > 1 and not args[1].startswith("-")
        if not close and not followed:
            return  # a lone name: the plan says whether a cached repository is meant
        meant = (
            f"did you mean `llmfit {close[0]}`?"
            if close
            else f"the commands are {', '.join(sorted(self.commands))}, and "
            "`llmfit REPO` plans a repository (org/name)"
        )
        raise click.UsageError(f"there is no command {word!r}: {meant}", ctx)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # `llmfit … | head`: the reader has what it wanted. Caught here, before click's own
            # handler turns it into exit 1 (llmfit's "nothing fits").
            from llmfit.render.streams import quiet_exit

            quiet_exit()
            raise  # not reached: quiet_exit raises SystemExit(0)


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="llmfit")
def cli() -> None:
    """Where a Hugging Face model can run on your GPU fleet, and the command to run it.

    llmfit REPO plans REPO (the same as `llmfit plan REPO`; see `llmfit plan --help`);
    `llmfit models` lists the models that fit a fleet; `llmfit fleet` summarises a fleet and
    imports one from nvidia-smi or kubectl.

    \b
    On the bundled fixtures (export HF_HUB_CACHE=fixtures/hub HF_HUB_OFFLINE=1):
      every way, ranked, and the best one's command:
        llmfit Qwen/Qwen3-235B-A22B --fleet examples/fleet.toml
      only the checkpoint as shipped, or what if it were fp8:
        llmfit Qwen/Qwen3-235B-A22B --fleet examples/fleet.toml --precision stored
        llmfit Qwen/Qwen3-235B-A22B --fleet examples/fleet.toml --precision fp8
      at a context, and the longest that fits when nothing does:
        llmfit meta-llama/Llama-3.1-8B-Instruct --fleet 1xrtx4090-24g --context 32k
      each card part by part, and why other ways were refused:
        llmfit deepseek-ai/DeepSeek-V3 --fleet examples/fleet.toml --explain --why-not
      the commands of a two-node launch (--ray for the Ray form):
        llmfit deepseek-ai/DeepSeek-V3 --fleet 2x8xh100-80g@ib0 --commands
      a GGUF repository on llama.cpp, and the JSON document:
        llmfit llmfit-fixtures/Tiny-Llama-GGUF --fleet cpu:64g,1xrtx4090-24g --json
      the fleet at a glance:
        llmfit fleet examples/fleet.toml
    """


# What a URL's userinfo (user:password@) looks like wherever it appears in a message.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@")
# A Hugging Face token's shape, for one that reaches a message by a way llmfit did not foresee.
_TOKEN_SHAPE = re.compile(r"\bhf_[A-Za-z0-9]{8,}")


# Credentials a command handed to llmfit holds (`llmfit check -- HF_TOKEN=… vllm serve … --api-key
# K`), kept out of every message as the token is.
HIDDEN: list[str] = []


def tokens() -> list[str]:
    """The tokens this run could send: the environment's, and the stored login's."""
    found = [os.environ.get(v, "") for v in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")]
    hub = sys.modules.get("huggingface_hub")
    if hub is not None:
        try:
            found.append(hub.get_token() or "")
        except Exception:  # a token file that cannot be read holds nothing to hide here
            pass
    return [t.strip() for t in found if len(t.strip()) >= 4]


def _private(text: str) -> str:
    """`text` with every credential taken out: a token, and the userinfo of any URL."""
    for token in [*tokens(), *(h for h in HIDDEN if len(h) >= 4)]:
        text = text.replace(token, "***")
    text = _TOKEN_SHAPE.sub("hf_***", text)
    return _USERINFO.sub(r"\1", text)


def _say(text: str, limit: int | None = None) -> None:
    """One line on stderr, made safe: it is built from outside text (names, revisions, the Hub's
    answers), so it is cleaned of what a terminal would act on and of credentials."""
    line = clean(_private(text)) if limit is None else clean(_private(text), limit)
    click.echo(line, err=True)


def say(text: str) -> None:
    """An error's sentence on stderr where the command goes on to write its own document and
    exit code (`llmfit check --json` of a refused pair): as `main` writes an error's."""
    _say(f"llmfit: {text}")


def _json_error(message: str, code: int, hint: str | None) -> None:
    """The error as the JSON document a --json run prints instead of its plan (docs/json.md)."""
    from llmfit.render.safe import safe_dumps

    error: dict[str, object] = {"message": clean(_private(message)), "exit": code}
    if hint:
        error["hint"] = clean(_private(hint))
    try:
        click.echo(safe_dumps({"schema": 1, "error": error}))
    except BrokenPipeError:
        pass


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; an LlmfitError becomes its sentence, its hint and its exit code.

    Anything else that escapes is a bug: one sentence and exit 10, the traceback only with
    LLMFIT_DEBUG=1. Each kind of bad input is handled where it is read; this is the last net.

    Output that cannot be written (a full disk, an I/O error, a stream closed before the run)
    is exit 11, whichever stream failed and whenever: while the answer was written, while an
    error's sentence was, or at the last flush (which the interpreter would otherwise report as
    exit 120, or a traceback). A reader that went away (`| head`) still ends quietly with 0.
    """
    if sys.stdout is None:
        # Closed before the run (`>&-`): Python set it to None, and every line written to it
        # would vanish while the exit code said the answer was given.
        if sys.stderr is not None:
            _try_say("llmfit: stdout is closed, so the answer cannot be written.")
        sys.exit(EXIT_OUTPUT)
    if sys.stderr is None:
        # Closed stderr (`2>&-`): the answer can still be given; a sentence about a failure has
        # nowhere to go, and its exit code says it.
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the rest of the process)
    from llmfit.render.streams import encoding_safe_streams

    encoding_safe_streams()
    code: str | int | None = 0
    try:
        _run(argv)
    except SystemExit as e:
        code = e.code
    except OSError as e:  # a stream failed while an error's sentence was written
        if isinstance(e, BrokenPipeError):
            _silence()
            code = 0
        else:
            code = _output_failed(e)
    sys.exit(_flushed(code))


def _try_say(line: str) -> None:
    try:
        click.echo(line, err=True)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _silence() -> None:
    """Point stdout and stderr at /dev/null, so that the interpreter's last flush of what could
    not be written does not fail again (and turn the exit code into 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(devnull, fd)
    except (OSError, ValueError):
        pass


def _output_failed(e: OSError) -> int:
    _try_say(f"llmfit: the output could not be written ({e.strerror or e}).")
    _silence()
    return EXIT_OUTPUT


def _flushed(code: str | int | None) -> str | int | None:
    """The exit code once stdout and stderr are flushed: EXIT_OUTPUT if either cannot be."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            _silence()
            return 0 if stream is sys.stdout else code
        except (OSError, ValueError) as e:
            return _output_failed(e) if isinstance(e, OSError) else code
    return code


def _writing(e: BaseException) -> bool:
    """Whether an OSError was raised writing to a stream (click's echo, rich's console), not by
    a read the sources left unconverted (that one is a bug, exit 10)."""
    if not isinstance(e, OSError) or isinstance(e, BrokenPipeError):
        return False
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    where = tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
    return where.endswith(("click/utils.py", "rich/console.py", "click/_compat.py"))


def _run(argv: list[str] | None) -> None:
    debug = bool(os.environ.get("LLMFIT_DEBUG"))
    args = sys.argv[1:] if argv is None else argv
    # Under --json (before any `--`, past which the words are a checked command's), an error is a
    # JSON document on stdout too, so that a script reading stdout always reads JSON.
    as_json = "--json" in (args[: args.index("--")] if "--" in args else args)
    try:
        cli.main(args=argv, prog_name="llmfit", standalone_mode=False)
    except LlmfitError as e:
        _say(f"llmfit: {e.message}")
        if e.hint:
            _say(f"hint: {e.hint}")
        if debug:
            raise
        if as_json:
            _json_error(e.message, e.exit_code, e.hint)
        sys.exit(e.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        # click's messages quote the argument as given: each line is cleaned as llmfit's own are.
        import io

        shown = io.StringIO()
        e.show(file=shown)
        for line in shown.getvalue().splitlines():
            _say(line)
        if as_json:
            _json_error(e.format_message(), e.exit_code, None)
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except Exception as e:
        if _writing(e):
            assert isinstance(e, OSError)
            sys.exit(_output_failed(e))
        if debug:
            import traceback

            for line in traceback.format_exc().splitlines():
                _say(line, limit=10_000)
        message = (
            f"internal error: {type(e).__name__}: {clean(str(e), 300)}; please report it with "
            "LLMFIT_DEBUG=1 output"
        )
        _say(f"llmfit: {message}")
        if as_json:
            _json_error(message, EXIT_INTERNAL, None)
        sys.exit(EXIT_INTERNAL)
