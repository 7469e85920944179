"""`llmfit models`: which models fit the fleet, from the local cache or the Hub's search."""

from __future__ import annotations

import sys

import click

from llmfit.cli.app import cli
from llmfit.cli.shared import (
    budget_option,
    context_option,
    engines_option,
    fleet_option,
    hub_progress,
    json_option,
    priced_budget,
    rank_option,
    workload_options,
)
from llmfit.cli.values import context_tokens, param_count, wants_trained
from llmfit.errors import EXIT_FITS, EXIT_NOTHING_FITS, UsageError
from llmfit.plan.settings import Workload


@cli.command(name="models")
@fleet_option()
@click.option("--search", help="Ask the Hub for repositories matching this (online).")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=20, show_default=True,
    help="With --search: how many repositories, most downloaded first.",
)  # fmt: skip
@context_option("Token pool to plan for (32768, 32k, 1m).")
@workload_options
@budget_option()
@engines_option()
@click.option(
    "--max-params",
    help="Leave out models with more parameters (8b, 70B, 1.5t), counted to the digits given: "
    "70b keeps Llama-3.1-70B's 70.6 billion.",
)
@rank_option(
    "The order, and each model's best option, as for `llmfit REPO`: the fewest cards (or lowest "
    "cost) that serve the workload, the fewest that hold the context, the most sequences held, "
    "the fastest single sequence, the most tokens a second a card, or the shortest request."
)
@json_option("Print a list of version-1 documents.")
def models_list(
    fleet_path: str | None,
    search: str | None,
    limit: int,
    context: str | None,
    workload: Workload,
    budget: float | None,
    engine_keys: tuple[str, ...],
    max_params: str | None,
    rank_by: str,
    json_: bool,
) -> None:
    """Which models fit the fleet: those in the local cache, or those the Hub's search finds.

    Each model is planned as `llmfit REPO` plans it and shown with its best option in one line,
    best first; then those that do not fit, and those that could not be read.

    \b
    Examples (on the bundled fixtures: HF_HUB_CACHE=fixtures/hub HF_HUB_OFFLINE=1):
      llmfit models --fleet examples/fleet.toml
      llmfit models --fleet 1xrtx4090-24g --context 32k --max-params 70b
      llmfit models --fleet examples/fleet.toml --rank concurrency
      llmfit models --fleet examples/fleet.toml --json
      llmfit models --fleet 8xh100-80g --rate 10  (which serve 10 requests a second)
    Online:
      llmfit models --fleet examples/fleet.toml --search qwen3 --limit 10
    """
    from llmfit.models import list_models
    from llmfit.plan.planner import PlanSettings
    from llmfit.sources.fleet import resolve_fleet
    from llmfit.sources.hub import offline as is_offline

    fleet = resolve_fleet(fleet_path)
    settings = PlanSettings(
        context=context_tokens(context), workload=workload, engines=engine_keys, rank=rank_by,
        budget=priced_budget(budget, fleet), desktop=not wants_trained(context),
    )  # fmt: skip
    if search is not None and is_offline():
        raise UsageError(
            "--search asks the Hub, but this run is offline (HF_HUB_OFFLINE).",
            hint="llmfit models  (the models in the local cache)",
        )
    with hub_progress(asks_hub=search is not None) as progress:
        found = list_models(
            fleet, settings, search=search, limit=limit, max_params=param_count(max_params),
            progress=progress,
        )  # fmt: skip
    if json_:
        from llmfit.render.models import render_models_json

        click.echo(render_models_json(found))
    else:
        from llmfit.render.console import make_console
        from llmfit.render.models import render_models

        render_models(found, make_console())
    sys.exit(EXIT_FITS if any(r.fits for r in found.results) else EXIT_NOTHING_FITS)
