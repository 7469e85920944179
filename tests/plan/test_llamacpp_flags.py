"""llama-server's flags (llamacpp_flags.py) are its README's argument tables, so that `llmfit check`
refuses the flags llama-server refuses and no other (issue 34, item 7)."""

from __future__ import annotations

import pytest

from fixtures.engines.write_llamacpp_flags import TABLE, flags
from llmfit.plan.engines.llamacpp_command import read, refuse_unknown
from llmfit.plan.engines.llamacpp_flags import SWITCHES, VALUED
from llmfit.plan.settings import PlanSettings

MODEL = ("llama-server", "-hf", "org/Model-GGUF:Q4_K_M")


def test_the_module_is_the_table():
    valued, switches = flags(TABLE.read_text(encoding="utf-8"))
    assert (set(VALUED), set(SWITCHES)) == (set(valued), set(switches))
    # Rows read by hand from the table: "| `-ngl, --gpu-layers, --n-gpu-layers N` |" takes a
    # value; "| `--jinja` |"… no: "| `--jinja, --no-jinja` |" are switches.
    assert {"-ngl", "--gpu-layers", "--n-gpu-layers"} <= VALUED
    assert {"--jinja", "--no-jinja", "-nkvo", "--no-kv-offload"} <= SWITCHES


@pytest.mark.parametrize(
    ("words", "sentence"),
    [
        # One letter short of --n-gpu-layers: difflib's ratio 2×13/27 = 0.96, past 0.8.
        (("--n-gpu-layer", "40"),
         "llama-server refuses it: --n-gpu-layer: not one of its flags; did you mean "
         "--n-gpu-layers?"),
        (("--ctx-sise=4096",),
         "llama-server refuses it: --ctx-sise: not one of its flags; did you mean "
         "--ctx-size?"),
        # Near no flag of llama-server's: refused all the same, as llama-server refuses it.
        (("--frobnicate",), "llama-server refuses it: --frobnicate: not one of its flags."),
    ],
)  # fmt: skip
def test_a_flag_llama_server_does_not_take_is_refused(words, sentence):
    with pytest.raises(ValueError) as e:
        read((*MODEL, *words), PlanSettings())
    assert str(e.value) == sentence


def test_every_flag_it_takes_is_read():
    # A value that looks like a flag is its flag's (--temp -1); "_" in a long flag is "-"
    # (common/arg.cpp, common_params_parse_ex); --no-mmap and --mlock are earlier builds'
    # (ENGINES.md), not refused.
    words = ("--temp", "-1", "--no_kv_offload", "--no-mmap", "--mlock", "-fa", "on", "--jinja")
    r = read((*MODEL, *words), PlanSettings())
    assert r.repo == "org/Model-GGUF"
    # No flag of the table is refused, given with a value or as a switch.
    refuse_unknown([w for f in sorted(VALUED) for w in (f, "1")] + sorted(SWITCHES))
