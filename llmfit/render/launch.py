"""An option's launch as the lines to print, in the format asked for: its shell command lines
(render/commands.py), or its `docker run` lines or Kubernetes YAML (render/deploy.py, imported
only when asked for: it loads a YAML emitter).

Apart from render/commands.py, which render/deploy.py builds on: the choice between the two
formats is made here, so neither imports the other back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmfit.render.commands import command_text, commands, scale_line
from llmfit.render.safe import clean

if TYPE_CHECKING:
    from llmfit.plan.advice import Advice
    from llmfit.plan.options import Option


def launch_lines(
    advice: Advice, o: Option, ray: bool = False, fmt: str = "shell", encoding: str | None = None
) -> list[str]:
    """The option's launch as the lines to print: each node's command under a comment naming its
    role and node, or its `docker run` lines or YAML (render/deploy.py). Every word of a command
    is checked before any line is returned, so nothing is printed of a launch that cannot be."""
    if fmt != "shell":
        from llmfit.render.deploy import render_deploy

        return render_deploy(fmt, advice, o, ray, encoding=encoding).rstrip("\n").split("\n")
    repo = advice.repo
    lines = []
    line = scale_line(o)
    if line:
        lines.append(
            clean(f"# {line}; start each on its own cards and port (--format docker or k8s "
                  "starts them all, behind one address)")
        )  # fmt: skip
    for cmd in commands(o, repo.id, repo.revision, ray):
        if cmd.node:
            lines.append(clean(f"# {cmd.role} on {cmd.node}"))
        lines.append(command_text(cmd, encoding))
    return lines
