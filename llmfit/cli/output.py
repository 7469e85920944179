"""The one dispatcher from a command's result to its renderer: JSON, the table, the commands
alone, a launch format, --explain or --why-not. Commands hand over a result and a View; what is
printed, and where, is decided here and only here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from llmfit.render.safe import clean, output_encoding

if TYPE_CHECKING:
    from llmfit.check import Checked
    from llmfit.plan.advice import Advice


@dataclass(frozen=True)
class View:
    """How a plan is to be shown, as the flags asked."""

    json: bool = False
    # Only the command lines (--commands), in `fmt`: shell, docker or k8s.
    commands: bool = False
    fmt: str = "shell"
    explain: bool = False
    why_not: bool = False
    # Every option and layout (--all).
    every: bool = False
    # The option shown in detail, counted from 1 (--option).
    number: int = 1
    ray: bool = False
    # The disaggregated option whose launch --commands prints, counted from 1 (--option D1);
    # None: an aggregated one's (`number`).
    disagg: int | None = None


def show_plan(advice: Advice, view: View) -> None:
    options = advice.plan.options
    chosen = options[view.number - 1] if options else None
    if view.json and view.explain and chosen is not None:
        # The plan's document, with the shown option's card part by part (docs/json.md).
        from llmfit.render.explain import explain_document
        from llmfit.render.json import document
        from llmfit.render.safe import safe_dumps

        click.echo(
            safe_dumps(
                {**document(advice, ray=view.ray), "explain": explain_document(advice, view.number)}
            )
        )
        return
    if view.json:
        from llmfit.render.json import render_json

        click.echo(render_json(advice, ray=view.ray))
        return
    from llmfit.render.console import make_console

    if view.disagg is not None:
        from llmfit.render.launch import render_disagg

        offer = advice.plan.disaggregated[view.disagg - 1]
        # Not cleaned, as the aggregated launch below: every word was checked to print exactly.
        click.echo(render_disagg(view.fmt, advice, offer, output_encoding()), nl=False)
        return
    console = make_console()
    if view.commands and view.explain and chosen is not None:
        # Both asked: the explanation, then the launch it explains (issue 34: --explain was
        # dropped).
        from llmfit.render.explain import render_explain
        from llmfit.render.launch import launch_lines
        from llmfit.render.table import render_commands

        launch_lines(advice, chosen, view.ray, view.fmt, output_encoding())
        render_explain(advice, console, view.number)
        console.print()
        render_commands(advice, console, chosen, view.ray, view.fmt)
        return
    if view.commands and chosen is None:
        from llmfit.render.table import nothing_to_run

        for line in nothing_to_run(advice):
            click.echo(clean(f"llmfit: {line}"), err=True)
    elif view.commands and view.fmt != "shell":
        from llmfit.render.launch import render_deploy

        assert chosen is not None
        # Not cleaned: every word of it was checked to print exactly (render/safe.py), and
        # cleaning would change a value inside the YAML or a docker line.
        click.echo(render_deploy(view.fmt, advice, chosen, view.ray, output_encoding()), nl=False)
    elif view.commands:
        from llmfit.render.table import render_commands

        assert chosen is not None
        render_commands(advice, console, chosen, view.ray, measure=True)
    elif view.explain or view.why_not:
        from llmfit.render.explain import render_explain, render_why_not

        if view.explain and options:
            render_explain(advice, console, view.number)
        if view.why_not:
            if view.explain:
                console.print()
            render_why_not(advice, console, every=view.every)
    else:
        from llmfit.render.launch import launch_lines
        from llmfit.render.table import render_text

        if options:
            # The shown option's launch is printed last: a word that cannot be printed exactly is
            # refused before the table is, not after it.
            launch_lines(advice, options[view.number - 1], view.ray, view.fmt, output_encoding())
        render_text(
            advice, console, show_all=view.every, ray=view.ray, fmt=view.fmt, number=view.number
        )


def show_check(checked: Checked, *, json: bool, fmt: str) -> None:
    if json:
        from llmfit.render.json import render_json

        click.echo(render_json(checked.advice, limit=1))
        return
    from llmfit.render.check import check_lines, render_check
    from llmfit.render.console import make_console

    if fmt == "shell":
        render_check(checked.argv, checked.request, checked.advice, make_console())
        return
    # The verdict as comments, then the launch: the whole output goes to `sh` or to
    # `kubectl apply -f -` as it stands.
    from llmfit.render.launch import render_deploy

    encoding = output_encoding()
    launch = ""
    if checked.fits:
        # Made (and its words checked) before anything is printed.
        launch = render_deploy(fmt, checked.advice, checked.advice.plan.options[0], False, encoding)
    for line in check_lines(checked.argv, checked.request, checked.advice, encoding):
        click.echo(clean("# " + line, limit=100_000))
    click.echo(launch, nl=False)
