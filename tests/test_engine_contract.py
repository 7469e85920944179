"""One contract over every registered engine, and a fourth engine that meets it through the
registry alone (issue 23).

For each engine and each layout it offers on a set of fleets (every layout, `--all`):
- the layout is within the engine's declared space (plan/layout.py LayoutSpace);
- its commands launch exactly that layout: the processes on as many nodes as it spans, one
  server a replica where it runs copies side by side; and each serving command, read back
  through the engine's own reader (`llmfit check`'s), plans to the same layout with the same bytes
  a card;
- every knob the engine declares round-trips: set on llmfit's command line, it is printed in the
  launch (or, for a placement knob, fixes what the launch prints) and read back to the same value.

The toy engine (tests/plan/toy_engine.py) is registered here through the real registry, with its
own knobs and a space of tensor parallelism on one node only. Nothing outside its file and its
registry line names it; it gets options, commands, `check`, JSON and its knob as a flag, and is
never offered a layout outside its space.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from llmfit.advise import advise
from llmfit.plan.engines import (
    engine,
    keys,
    knobs,
    options_class,
    register,
    split_env,
    unregister,
)
from llmfit.plan.layout import Layout
from llmfit.plan.options import Option
from llmfit.plan.planner import PlanSettings, plan
from llmfit.render.commands import commands
from llmfit.sources.fleet import resolve_fleet
from tests.plan import toy_engine
from tests.plan.test_llamacpp import card_node, llama8b, plan_file

GIB = 1 << 30


@pytest.fixture
def toy() -> Iterator[str]:
    register("toy", toy_engine.LINE)
    try:
        yield "toy"
    finally:
        unregister("toy")


# (repository, fleet, engines): safetensors on one node, a MoE, two nodes over a fabric, GGUF.
CASES = [
    ("Qwen/Qwen3-8B", "8xh100-80g", ("vllm", "sglang")),
    ("Qwen/Qwen3-30B-A3B", "8xh100-80g", ("vllm", "sglang")),
    ("deepseek-ai/DeepSeek-V3", "2x8xh100-80g@ib0", ("vllm", "sglang")),
    ("meta-llama/Meta-Llama-3.1-405B", "4x8xh100-80g@ib0", ("vllm", "sglang")),
    ("llmfit-fixtures/Tiny-Llama-GGUF", "8xrtx4090-24g", ("llama.cpp",)),
    ("llmfit-fixtures/Tiny-Llama-GGUF", "cpu:64g", ("llama.cpp",)),
]


def _serving(cmds: list) -> list:
    """The commands that start a server or a replica's head (not a worker's rpc-server)."""
    return [c for c in cmds if c.role in ("all", "head", "replica")]


def _one_launch(o: Option) -> Layout:
    """What one serving command launches: the whole layout, or one replica of copies that each
    run as their own server."""
    lay = o.layout
    if lay.replicas > 1 and not _replicas_in_one_command(o):
        return Layout(lay.tp, lay.pp, 1, lay.ep, lay.nodes, 1)
    return lay


def _replicas_in_one_command(o: Option) -> bool:
    # A dense model's data-parallel copies under vLLM or SGLang are one server's ranks.
    return len(_serving(commands(o, "org/x"))) == 1


def check_option(o: Option, model, artifact, fleet, settings: PlanSettings) -> None:
    e = engine(o.engine)
    assert e.layouts.refusal(o.layout) is None, (o.engine, o.layout)
    cmds = commands(o, "org/model")
    nodes = {c.node for c in cmds if c.role in ("head", "worker")}
    if o.layout.nodes > 1:
        assert len([c for c in cmds if c.role == "head"]) >= 1
        assert len(nodes) == o.layout.nodes or None in nodes, (o.engine, o.layout, cmds)
    servers = _serving(cmds)
    if len(servers) > 1:
        # Copies side by side: one server each, as many as the layout has.
        assert len(servers) == o.layout.replicas and {c.role for c in servers} == {"replica"}
    head = servers[-1]
    request = e.read_command(list(head.argv), PlanSettings(), dict(head.env))
    again = plan(
        model, [artifact], fleet, replace(request.settings, every_layout=True, engines=(o.engine,))
    )
    want = _one_launch(o)
    same = [a for a in again.options if a.layout == want]
    assert same, (o.engine, o.layout, head.shell, [a.layout for a in again.options])
    if want == o.layout:
        assert any(a.per_card == o.per_card for a in same), (o.engine, o.layout, head.shell)


@pytest.mark.parametrize(("repo", "fleet", "keys_"), CASES)
def test_every_layout_offered_is_launched_as_planned(hub, repo, fleet, keys_):
    f = resolve_fleet(fleet)
    settings = PlanSettings(engines=keys_, every_layout=True, precision="stored")
    advice = advise(repo, f, settings, offline=True)
    options = advice.plan.options
    assert options
    for o in options:
        art = o.artifact
        stored = next(a for a in advice.repo.artifacts if a.name == art.name)
        check_option(o, advice.repo.model, stored, f, settings)


def test_layer_split_over_nodes_is_launched_as_planned(tmp_path):
    path = llama8b(tmp_path)
    nodes = [card_node(f"n{i}", 1, 4 * GIB, fabric="ib0") for i in (1, 2)]
    p = plan_file(path, nodes, 8192)
    from llmfit.plan.fleet import Fleet
    from llmfit.sources.gguf import gguf_artifacts, model_from_gguf

    found = gguf_artifacts(path.parent)
    model = model_from_gguf(found.first_header)
    over = [o for o in p.options if o.nodes == 2]
    assert over
    for o in over:
        check_option(o, model, found.artifacts[0], Fleet(tuple(nodes)), PlanSettings())


def test_the_registry_lists_every_engine_the_contract_covers():
    # The contract's cases name every engine registered here (a new engine adds its case).
    covered = {k for _, _, ks in CASES for k in ks}
    assert covered == set(keys())


# -- the knobs ------------------------------------------------------------------------------------

# Where each engine's knobs are tried: a model and fleet it fits with every knob set.
KNOB_CASES = {
    "vllm": ("Qwen/Qwen3-8B", "1xh100-80g"),
    "sglang": ("Qwen/Qwen3-8B", "1xh100-80g"),
    "llama.cpp": ("llmfit-fixtures/Tiny-Llama-GGUF", "1xrtx4090-24g"),
    "toy": ("Qwen/Qwen3-8B", "1xh100-80g"),
}


def _knob_cases() -> list[tuple[str, str]]:
    out = []
    for key in (*keys(), "toy"):
        cls = toy_engine.ToyOptions if key == "toy" else options_class(key)
        for d in knobs.declared(cls):
            if d.knob.flags and d.knob.llmfit_flag:
                out.append((key, d.name))
    return out


@pytest.mark.parametrize(("key", "name"), _knob_cases())
def test_every_declared_knob_round_trips(run, request, key, name):
    """Planned with the knob set, the launch printed carries it (or, for a knob that fixes the
    placement, the placement it fixes), and `llmfit check` of that launch reads the knob back
    and plans the same card to the byte."""
    if key == "toy":
        request.getfixturevalue("toy")
    cls = options_class(key)
    d = next(d for d in knobs.declared(cls) if d.name == name)
    k = d.knob
    assert k.llmfit_flag is not None
    if k.kind in ("switch", "bool"):
        flag_words = [k.llmfit_flag] if not d.default else [k.negations[0]]
    else:
        assert k.example is not None, f"{key} {name} declares no example"
        flag_words = [k.llmfit_flag, k.example]
    repo, fleet = KNOB_CASES[key]
    code, out, err = run(repo, "--fleet", fleet, "--engine", key, *flag_words, "--json",
                         "--precision", "stored")  # fmt: skip
    assert code == 0, err
    first = json.loads(out)["options"][0]
    (serve,) = [c for c in first["commands"] if c["role"] in ("all", "head")]
    argv = shlex.split(serve["shell"])
    env, words = split_env(argv)
    if k.passed:
        got = engine(key).read_command(words, PlanSettings(), env).settings.options(cls)
        if k.takes_value:
            want = knobs.parse(k, k.flag, flag_words[-1])
        else:
            want = not d.default if k.kind == "bool" else True
        assert getattr(got, name) == want, (serve["shell"], got)
    code, out, err = run("check", "--fleet", fleet, "--json", "--", *argv)
    assert code == 0, err
    again = json.loads(out)["options"][0]
    assert again["per_card"] == first["per_card"], serve["shell"]
    assert again["commands"][-1]["shell"] == serve["shell"]


def test_no_two_knobs_share_a_flag_on_llmfit_s_command_line(toy):
    from llmfit.cli.shared import knob_params

    flags = [f for p in knob_params() for f in p.opts + p.secondary_opts]
    assert len(flags) == len(set(flags)), sorted(f for f in flags if flags.count(f) > 1)


# -- the toy engine -------------------------------------------------------------------------------


def test_the_toy_engine_is_offered_only_its_declared_space(hub, toy):
    # DeepSeek-V3 fits no single node of 8 H100s as stored; two nodes over ib0 would hold it,
    # but the toy engine cannot span nodes, so it is offered nothing, and says why not.
    f = resolve_fleet("2x8xh100-80g@ib0")
    settings = PlanSettings(engines=("toy",), every_layout=True, precision="stored")
    p = advise("Qwen/Qwen3-8B", f, settings, offline=True).plan
    # tp 1, 2, 4, 8 on one node; no pipeline, no data-parallel ranks, no second node.
    assert sorted(o.layout.tp for o in p.options) == [1, 2, 4, 8]
    assert {(o.layout.pp, o.layout.dp, o.layout.nodes) for o in p.options} == {(1, 1, 1)}
    big = advise("deepseek-ai/DeepSeek-V3", f, settings, offline=True).plan
    assert big.options == ()


def test_the_toy_engine_plans_checks_and_prints_json_through_the_cli(run, toy):
    # Qwen3-8B, one H100 at --kv-fraction 0.5: weights 16,381,470,720 B (the index's total),
    # 1 GiB runtime; the card 85,045,477,376 B (79.2 GiB) × 0.5 = 42,522,738,688 B to have.
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", "toy",
                         "--kv-fraction", "0.5", "--commands")  # fmt: skip
    assert (code, err) == (0, "")
    assert out.strip() == "toy-serve Qwen/Qwen3-8B --tp 1 --ctx 40960 --kv-fraction 0.5"
    code, out, err = run("check", "--fleet", "1xh100-80g", "--json", "--", "toy-serve",
                         "Qwen/Qwen3-8B", "--tp", "1", "--kv-fraction", "0.5",
                         "-B", "32")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    (o,) = doc["options"]
    assert (o["engine"], o["toy_width"], o["gpus"]) == ("toy", 1, 1)
    assert o["per_card"]["weights"] == 16_381_470_720
    assert o["per_card"]["overhead"] == GIB
    assert o["per_card"]["have"] == 42_522_738_688
    assert o["commands"][0]["argv"] == [
        "toy-serve", "Qwen/Qwen3-8B", "--tp", "1", "--ctx", "40960", "--kv-fraction", "0.5",
        "--max-batch", "32",
    ]  # fmt: skip


def test_the_toy_engine_s_knob_is_a_flag_with_its_help(run, toy):
    code, out, _ = run("plan", "--help")
    assert code == 0
    assert "--kv-fraction X" in out and "Toy: the share of a card the engine takes." in out


def test_the_toy_engine_s_knob_is_checked_as_declared(run, toy):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", "toy",
                         "--kv-fraction", "1.5")  # fmt: skip
    assert code == 2
    assert "Invalid value for '--kv-fraction': 1.5 is not between 0 and 1." in err


def test_every_engine_s_json_field_is_null_on_the_others(run, toy):
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--json", "--precision",
                       "stored")  # fmt: skip
    assert code == 0
    options = json.loads(out)["options"]
    # A registered engine is planned by default, beside the others.
    assert {o["engine"] for o in options} == {"vllm", "toy"}
    for o in options:
        assert o["toy_width"] == (o["tp"] if o["engine"] == "toy" else None)


def test_the_toy_engine_needs_nothing_outside_its_file(tmp_path):
    # Its registry line points into its own module; the package names it nowhere.
    root = Path(__file__).resolve().parent.parent / "llmfit"
    assert not [p for p in root.rglob("*.py") if "toy" in p.read_text()]


def test_each_registry_line_says_what_its_engine_runs_and_starts(toy):
    from llmfit.plan.engines import registered

    for key in keys():
        e, line = engine(key), registered(key)
        assert tuple(line.programs) == tuple(e.programs), key
        assert e.name == line.title, key
