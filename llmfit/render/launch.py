"""An option's launch in the format asked for: its shell command lines (render/commands.py),
its `docker run` lines or Kubernetes YAML (render/deploy.py, render/disagg_deploy.py for a
disaggregated one), or a platform's spec (render/platforms.py); each imported only when asked for
(they load a YAML emitter).

The choice between the formats is made here, apart from the modules that write them, each built
on the one before: so none imports another back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmfit.render.commands import command_text, commands, scale_line
from llmfit.render.safe import clean

if TYPE_CHECKING:
    from llmfit.plan.advice import Advice
    from llmfit.plan.disagg import Offer
    from llmfit.plan.options import Option


def launch_lines(
    advice: Advice, o: Option, ray: bool = False, fmt: str = "shell", encoding: str | None = None
) -> list[str]:
    """The option's launch as the lines to print: each node's command under a comment naming its
    role and node, or its `docker run` lines or YAML (render/deploy.py). Every word of a command
    is checked before any line is returned, so nothing is printed of a launch that cannot be."""
    if fmt != "shell":
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


def render_deploy(
    fmt: str, advice: Advice, o: Option, ray: bool = False, encoding: str | None = None
) -> str:
    """The option's launch in `fmt` ("docker", "k8s", or a platform's spec: render/platforms.py),
    every word exact or refused."""
    if fmt in ("docker", "k8s"):
        from llmfit.render.deploy import render_docker, render_k8s

        return (render_docker if fmt == "docker" else render_k8s)(advice, o, ray, encoding)
    from llmfit.render.platforms import render_aggregated

    return render_aggregated(fmt, advice, o, ray, encoding)


def render_disagg(fmt: str, advice: Advice, offer: Offer, encoding: str | None = None) -> str:
    """A disaggregated option's launch in `fmt` ("shell", "docker", "k8s", or a platform's spec:
    render/platforms.py), every word exact or refused."""
    if fmt in ("shell", "docker", "k8s"):
        from llmfit.render import disagg_deploy

        if fmt == "k8s":
            return disagg_deploy.render_k8s(advice, offer, encoding)
        write = disagg_deploy.shell_lines if fmt == "shell" else disagg_deploy.docker_lines
        return "\n".join(write(advice, offer, encoding)) + "\n"
    from llmfit.render.platforms import render_platform

    return render_platform(fmt, advice, offer, encoding)
