"""`llmfit fleet`: a fleet's summary, and the imports that write a fleet file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from llmfit.cli.app import _DefaultGroup, cli
from llmfit.cli.shared import json_option
from llmfit.errors import UsageError
from llmfit.render.safe import clean_lines


class _FleetGroup(_DefaultGroup):
    """`llmfit fleet [FLEET]` shows the summary; `llmfit fleet import …` writes a fleet file."""

    default = "show"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in (*self.commands, "--help", "-h"):
            args = [self.default, *args]
        return click.Group.parse_args(self, ctx, args)


@cli.group(name="fleet", cls=_FleetGroup)
def fleet_group() -> None:
    """The fleet: a summary of what it has and what is free, and imports that write a fleet file.

    \b
    Example usage:
      llmfit fleet                          # ./fleet.toml, $LLMFIT_FLEET, or this machine
      llmfit fleet examples/fleet.toml --json
      llmfit fleet 4x8xh100-80g@ib0,cpu:512g
      llmfit fleet import nvidia-smi gpus.csv -L gpus.txt --name gpu-1 -o fleet.toml
      kubectl get nodes -o json | llmfit fleet import kubectl - --fabric-label example.com/fabric
    """


@fleet_group.command(name="show")
@click.argument("fleet", required=False)
@json_option("Print the summary as a JSON document.")
def fleet_show(fleet: str | None, json_: bool) -> None:
    """Summarise FLEET (a fleet file or an inline fleet; default as for planning)."""
    from llmfit.plan.fleet_summary import summarize
    from llmfit.render.fleet import render_summary, render_summary_json
    from llmfit.sources.fleet import resolve_fleet

    summary = summarize(resolve_fleet(fleet))
    click.echo(render_summary_json(summary) if json_ else clean_lines(render_summary(summary)))


@fleet_group.group(name="import")
def fleet_import() -> None:
    """Write a fleet file from what nvidia-smi or kubectl reports (to stdout, or -o FILE)."""


def _write(text: str, output: Path | None, count: int) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    from llmfit.sources.fleet_import import write_fleet_file

    try:
        write_fleet_file(text, output)
    except OSError as e:
        raise UsageError(f"-o {output}: cannot be written ({e.strerror or e}).") from None
    click.echo(f"wrote {count} node{'s' if count != 1 else ''} to {output}", err=True)


_output = click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here."
)


# The inputs are read by sources/fleet_import.py within bounds (a device refused unread, a pipe
# read as a stream), not opened by click, whose File would read /dev/zero until memory ran out.
_input = click.Path(exists=True, dir_okay=True, allow_dash=True)


@fleet_import.command(name="nvidia-smi")
@click.argument("csv_file", type=_input)
@click.option(
    "-L", "--list", "list_file", type=_input,
    help="Output of nvidia-smi -L from the same node, for its MIG instances.",
)  # fmt: skip
@click.option("--query-gpu", help="The fields a CSV without a header row was made with.")
@click.option("--name", help="The node's name; default: the file's name.")
@click.option("--fabric", default="", help="The fabric the node is on.")
@click.option("--ram-gb", type=click.FloatRange(0), default=0, help="The node's RAM in GB.")
@_output
def fleet_import_nvidia_smi(
    csv_file: str,
    list_file: str | None,
    query_gpu: str | None,
    name: str | None,
    fabric: str,
    ram_gb: float,
    output: Path | None,
) -> None:
    """A one-node fleet file from `nvidia-smi --query-gpu=name,memory.total,... --format=csv`.

    \b
    Example usage:
      nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv > gpus.csv
      nvidia-smi -L > gpus.txt
      llmfit fleet import nvidia-smi gpus.csv -L gpus.txt --name gpu-1 --ram-gb 1024
    """
    from llmfit.sources.fleet_import import (
        MAX_NVIDIA_SMI_BYTES,
        fleet_toml,
        import_nvidia_smi,
        ram_flag,
        read_input,
    )

    source = "<stdin>" if csv_file == "-" else csv_file
    node_name = name or (Path(source).stem if source != "<stdin>" else "node1")
    stdin = sys.stdin.buffer if sys.stdin is not None else None
    node = import_nvidia_smi(
        read_input(csv_file, MAX_NVIDIA_SMI_BYTES, stdin),
        source,
        name=node_name,
        query=query_gpu,
        listing=read_input(list_file, MAX_NVIDIA_SMI_BYTES, stdin) if list_file else None,
        fabric=fabric,
        ram_bytes=ram_flag(ram_gb),
    )
    header = f"written by llmfit fleet import nvidia-smi from {source}"
    _write(fleet_toml((node,), header), output, 1)


@fleet_import.command(name="kubectl")
@click.argument("json_file", type=_input)
@click.option("--fabric-label", help="The node label that names each node's fabric.")
@_output
def fleet_import_kubectl(json_file: str, fabric_label: str | None, output: Path | None) -> None:
    """A fleet file from `kubectl get nodes -o json` (GPU Feature Discovery labels).

    \b
    Example usage:
      kubectl get nodes -o json > nodes.json
      llmfit fleet import kubectl nodes.json --fabric-label example.com/fabric -o fleet.toml
    """
    from llmfit.sources.fleet_import import (
        MAX_KUBECTL_BYTES,
        fleet_toml,
        import_kubectl,
        read_input,
    )

    source = "<stdin>" if json_file == "-" else json_file
    raw = read_input(json_file, MAX_KUBECTL_BYTES, sys.stdin.buffer if sys.stdin else None)
    nodes = import_kubectl(raw, source, fabric_label)
    header = f"written by llmfit fleet import kubectl from {source}"
    if fabric_label:
        header += f", fabric from label {fabric_label}"
    header += "\nKubernetes does not say which cards are busy: every healthy card is written free."
    _write(fleet_toml(nodes, header), output, len(nodes))
