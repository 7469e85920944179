"""Reading a printed launch back as its consumer reads it (issue 24): a shell line with shlex, and
Kubernetes YAML with a YAML 1.2 reader (kubectl's) plus Kubernetes' `$(VAR)` expansion.

`k8s_expand` is Kubernetes' own rule (k8s.io/kubernetes third_party/forked/golang/expansion
expand.go, `Expand` and `tryReadVariableName`), written out: `$$` is one `$`; `$(NAME)` is the
value of NAME when the container defines it, else left as it is; any other `$` is itself.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
from pathlib import Path

from ruamel.yaml import YAML


def k8s_expand(text: str, env: dict[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "$" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
            else:
                name = text[i + 2 : close]
                out.append(env[name] if name in env else f"$({name})")
                i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


def yaml12(text: str) -> list:
    """Every document of `text` as YAML 1.2's core schema reads it (kubectl's reader)."""
    reader = YAML(typ="safe", pure=True)
    reader.version = (1, 2)
    return [d for d in reader.load_all(io.StringIO(text)) if d is not None]


def fake_program(folder: Path, name: str) -> Path:
    """A program that writes the words it was started with, each ended by NUL, into the file
    $ARGV_OUT: to see what a shell or a pod's script really runs."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(
        '#!/bin/sh\n{ printf "%s\\0" "${0##*/}"; for a in "$@"; do printf "%s\\0" "$a"; done; }'
        ' >>"$ARGV_OUT"\n'
    )
    path.chmod(0o755)
    return path


def run_argv(command: list[str], bin_dir: Path, env: dict[str, str] | None = None) -> list[str]:
    """What `command` (a pod's command, already expanded) runs, read from a fake program."""
    out = bin_dir / "argv.out"
    out.unlink(missing_ok=True)
    full = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "ARGV_OUT": str(out), **(env or {})}
    subprocess.run(command, env=full, check=True, timeout=30, cwd=bin_dir)
    return [os.fsdecode(w) for w in out.read_bytes().split(b"\0")[:-1]]


def run_line(line: str, bin_dir: Path) -> list[str]:
    """What a printed shell line runs under /bin/sh."""
    return run_argv(["/bin/sh", "-c", line], bin_dir)


def split_back(line: str) -> list[str]:
    return shlex.split(line)
