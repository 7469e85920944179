"""One contract over every registered engine, and a fourth engine that meets it through the
registry alone (issues 23 and 35).

Each engine's registry line names where it is tried (`cases`, `knob_case`); every engine in the
registry, the toy one registered here among them, is checked on its own cases and nothing here
names one. For each engine and each layout it offers there (every layout, `--all`):
- the layout is within the engine's declared space (plan/layout.py LayoutSpace);
- its commands launch exactly that layout: the processes on as many nodes as it spans, one
  server a replica where it runs copies side by side; and each serving command, read back
  through the engine's own reader (`llmfit check`'s), plans to the same layout with the same bytes
  a card;
- `--explain`'s parts add up to what its fullest card needs;
- each serving command's program is one its container image runs;
- every knob the engine declares round-trips: set on llmfit's command line, it is printed in the
  launch (or, for a placement knob, fixes what the launch prints) and read back to the same value;
  and a knob declared to change memory (or speed) changes what a card holds (or the speed
  figures) when set to its example.

Each of the last three checks is also shown to fail on an engine with the bug planted.

The toy engine (tests/plan/toy_engine.py) is registered through the real registry, with its
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
from typing import Any

import pytest

from llmfit.advise import advise
from llmfit.plan.engines import (
    Explanation,
    Image,
    engine,
    keys,
    knob_case,
    knobs,
    options_class,
    register,
    registered,
    split_env,
)
from llmfit.plan.layout import Layout
from llmfit.plan.options import Option
from llmfit.plan.planner import PlanSettings, plan
from llmfit.render.commands import commands
from llmfit.sources.fleet import resolve_fleet
from tests.plan import toy_engine
from tests.plan.test_llamacpp import card_node, llama8b, plan_file
from tests.registered import toy_registered, with_toy

GIB = 1 << 30


@pytest.fixture
def hub(gguf_hub: Path) -> Path:
    """The bundled cache with the real models' GGUF repositories that llama.cpp's knob cases name
    (a mixture of experts, sliding windows; fixtures/gguf_repos.py) beside it."""
    return gguf_hub


@pytest.fixture(autouse=True)
def toy() -> Iterator[str]:
    """Every test here runs with the toy engine registered, as a fourth engine would be."""
    with toy_registered() as key:
        yield key


# (engine, repository, fleet): every registered engine's own cases, from its registry line.
ENGINES = with_toy()
with toy_registered():
    CASES = [(k, repo, fleet) for k in ENGINES for repo, fleet in registered(k).cases]


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


def _in_image(argv: tuple[str, ...], image: Image) -> bool:
    """Whether the image runs a command: its ENTRYPOINT's words lead it (the container is given the
    rest), or, for an image with none, its program is the image's server; else its program is
    one of the others the image has on its PATH."""
    if image.entrypoint and argv[: len(image.entrypoint)] == image.entrypoint:
        return True
    if not image.entrypoint and image.programs and argv[:1] == image.programs[:1]:
        return True
    return bool(argv) and argv[0] in image.programs


def image_problems(o: Option) -> list[str]:
    """Each serving command of the option that its engine's image cannot run (a worker may
    have no image: llama.cpp's rpc-server is in none, and the deployment refuses it by name)."""
    image = engine(o.engine).image(o)
    return [
        f"{o.engine}: {c.argv[0]} is not run by {image.name} (entrypoint {image.entrypoint})"
        for c in _serving(commands(o, "org/model"))
        if not _in_image(tuple(c.argv), image)
    ]


def explain_problems(o: Option, model) -> list[str]:
    """Where `--explain`'s parts do not add up to what the option's fullest card needs."""
    told = engine(o.engine).explain(o, model)
    total = sum(p.bytes for p in told.parts)
    if total == o.per_card.need:
        return []
    parts = ", ".join(f"{p.name} {p.bytes:,}" for p in told.parts)
    return [
        f"{o.engine} {o.layout}: {parts} add up to {total:,}, the card needs {o.per_card.need:,}"
    ]


def check_option(o: Option, model, artifact, fleet, settings: PlanSettings) -> None:
    e = engine(o.engine)
    assert e.layouts.refusal(o.layout) is None, (o.engine, o.layout)
    assert explain_problems(o, model) == []
    assert image_problems(o) == []
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


@pytest.mark.parametrize(("key", "repo", "fleet"), CASES)
def test_every_layout_offered_is_launched_as_planned(hub, key, repo, fleet):
    f = resolve_fleet(fleet)
    settings = PlanSettings(engines=(key,), every_layout=True, precision="stored")
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
    model = model_from_gguf(found.first_headers)
    over = [o for o in p.options if o.nodes == 2]
    assert over
    for o in over:
        check_option(o, model, found.artifacts[0], Fleet(tuple(nodes)), PlanSettings())


def test_every_registered_engine_names_where_it_is_tried():
    # A registered engine with no case of its own is checked nowhere: its line must name them.
    for key in keys():
        line = registered(key)
        assert line.cases and line.knob_case, f"{key}'s registry line names no contract case"
    assert "toy" in {k for k, _, _ in CASES}


# -- the knobs ------------------------------------------------------------------------------------


def _knob_cases() -> list[tuple[str, str]]:
    out = []
    with toy_registered():
        for key in ENGINES:
            for d in knobs.declared(options_class(key)):
                if d.knob.flags and d.knob.llmfit_flag:
                    out.append((key, d.name))
    return out


@pytest.mark.parametrize(("key", "name"), _knob_cases())
def test_every_declared_knob_round_trips(run, key, name):
    """Planned with the knob set, the launch printed carries it (or, for a knob that fixes the
    placement, the placement it fixes), and `llmfit check` of that launch reads the knob back
    and plans the same card to the byte."""
    cls = options_class(key)
    d = next(d for d in knobs.declared(cls) if d.name == name)
    k = d.knob
    assert k.llmfit_flag is not None
    if k.kind in ("switch", "bool"):
        flag_words = [k.llmfit_flag] if not d.default else [k.negations[0]]
    else:
        assert k.example is not None, f"{key} {name} declares no example"
        flag_words = [k.llmfit_flag, k.example]
    case = knob_case(key, name)
    assert case is not None
    repo, fleet = case
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


def _settings(cls: type, d: knobs.Declared) -> list[dict[str, Any]]:
    """The knob at its example, with what it implies, as llmfit's command line sets it
    (cli/shared.py engine_options); a switch turned on, a yes-or-no knob either way (its default
    is the engine's own choice, which may be either)."""
    k = d.knob
    if k.takes_value:
        assert k.example is not None, f"{d.name} declares no example"
        values: list[Any] = [knobs.parse(k, k.flag, k.example)]
    else:
        values = [True] if k.kind == "switch" else [True, False]
    out = []
    for value in values:
        one = {d.name: value}
        if k.implies:
            one.setdefault(k.implies, True)
        out.append(one)
    return out


def _memory(o: Option) -> tuple[object, ...]:
    """What a card holds and offers: its parts, its share, its KV pool, the host's part."""
    return (o.per_card, o.have, o.kv_tokens, o.host_bytes)


def _speed(o: Option) -> tuple[object, ...]:
    return (o.speed, o.serving)


def knob_problems(key: str, name: str) -> list[str]:
    """Each thing knob `name` of engine `key` is declared to change (knobs.MEMORY, knobs.SPEED)
    that no option of its knob case changes when the knob is set to its example."""
    cls = options_class(key)
    d = next(d for d in knobs.declared(cls) if d.name == name)
    case = knob_case(key, name)
    assert case is not None
    repo, fleet = case
    f = resolve_fleet(fleet)
    base = PlanSettings(engines=(key,), precision="stored", every_layout=True)
    before = advise(repo, f, base, offline=True).plan.options
    assert before, f"{key} {name}: nothing of {repo} is planned on {fleet}"
    changed: set[str] = set()
    for one in _settings(cls, d):
        after = advise(repo, f, base.with_options(_built(cls, d, one)), offline=True).plan.options
        # Compared as wholes: a knob that fixes the placement (-ngl, --tensor-split) offers other
        # layouts than the plan without it, and any that changes nothing offers the same.
        for what, figures in ((knobs.MEMORY, _memory), (knobs.SPEED, _speed)):
            if _each(before, figures) != _each(after, figures):
                changed.add(what)
    return [
        f"{key} {d.knob.flag} {d.knob.example or ''}".rstrip()
        + f": declared to change {what}, changes nothing of it in {len(before)} options"
        for what in (knobs.MEMORY, knobs.SPEED)
        if what in d.knob.changes and what not in changed
    ]


def _each(options: Any, figures: Any) -> list[str]:
    return sorted(repr((o.artifact.name, o.layout, o.what_if, figures(o))) for o in options)


def _built(cls: type, d: knobs.Declared, values: dict[str, Any]) -> object:
    """The options with `values` (knob `d`'s, and what it implies) set; a knob the engine takes
    only with its pair (llama.cpp's K and V cache types, both or neither) is set with the knobs
    of its kind that share its example."""
    try:
        return knobs.build(cls, values)
    except ValueError:
        pair = {
            o.name: values[d.name]
            for o in knobs.declared(cls)
            if o.knob.kind == d.knob.kind and o.knob.example == d.knob.example
        }
        return knobs.build(cls, {**values, **pair})


def _changing_knobs() -> list[tuple[str, str]]:
    out = []
    with toy_registered():
        for key in ENGINES:
            for d in knobs.declared(options_class(key)):
                if d.knob.changes and (d.knob.example is not None or not d.knob.takes_value):
                    out.append((key, d.name))
    return out


@pytest.mark.parametrize(("key", "name"), _changing_knobs())
def test_every_knob_changes_what_it_declares(hub, key, name):
    assert knob_problems(key, name) == []


def test_every_knob_that_changes_a_plan_has_an_example():
    # Without one, what it changes is tried nowhere (the test above skips it).
    missing = [
        (key, d.name)
        for key in keys()
        for d in knobs.declared(options_class(key))
        if d.knob.changes and d.knob.takes_value and d.knob.example is None
    ]
    assert missing == []


# -- the checks catch the bugs they are for ---------------------------------------------------


def _toy_options(**settings: Any) -> tuple[list[Option], Any]:
    advice = advise("Qwen/Qwen3-8B", resolve_fleet("1xh100-80g"),
                    PlanSettings(engines=("toy",), precision="stored", **settings),
                    offline=True)  # fmt: skip
    return list(advice.plan.options), advice.repo.model


def test_a_memory_knob_the_sizing_ignores_is_found(hub, monkeypatch):
    # The toy's sizer, planted with the bug: it reads no --kv-fraction, though the knob says it
    # changes memory. Unplanted, the same knob passes (test_every_knob_changes_what_it_declares).
    sizer = toy_engine.Toy._sizer

    def ignoring(self, job, art, shape, pool, v):
        return sizer(self, replace(job, settings=replace(job.settings, engine_options=())),
                     art, shape, pool, v)  # fmt: skip

    monkeypatch.setattr(toy_engine.Toy, "_sizer", ignoring)
    assert knob_problems("toy", "kv_fraction") == [
        "toy --kv-fraction 0.5: declared to change memory, changes nothing of it in 1 options"
    ]


def test_explain_parts_that_do_not_add_up_are_found(hub, monkeypatch):
    # Planted: the toy's --explain leaves its runtime GiB out, so its parts add up to 1 GiB less
    # than the card's need (weights + one sequence's KV + 1 GiB).
    def short(self, option, model):
        told = explain(self, option, model)
        return Explanation(tuple(p for p in told.parts if p.name != "overhead"), told.assumes)

    explain = toy_engine.Toy.explain
    (o, *_), model = _toy_options()
    assert explain_problems(o, model) == []
    monkeypatch.setattr(toy_engine.Toy, "explain", short)
    (problem,) = explain_problems(o, model)
    assert problem.endswith(f"add up to {o.per_card.need - GIB:,}, the card needs "
                            f"{o.per_card.need:,}")  # fmt: skip


def test_an_image_that_cannot_run_the_command_is_found(hub, monkeypatch):
    # Planted: the toy's image runs `toy-server`, and its command is `toy-serve`.
    (o, *_), _ = _toy_options()
    assert image_problems(o) == []
    wrong = Image("example.com/toy:1", ("toy-server",), 9000, "/")
    monkeypatch.setattr(toy_engine.Toy, "image", lambda self, option: wrong)
    assert image_problems(o) == [
        "toy: toy-serve is not run by example.com/toy:1 (entrypoint ('toy-server',))"
    ]


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
    # --engine's choices and its default, from the registry: the toy is planned by default.
    words = " ".join(out.split())
    assert "--engine [vllm|llama.cpp|sglang|toy]" in words
    default = "default: vLLM, llama.cpp and Toy, whichever can run the model (SGLang when named)."
    assert default in words


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


# -- a setting the planned engine does not take is refused, by one rule ------------------------

# A value each of llmfit's own engine settings takes (None: a flag without one, or one that is
# its value too: "--disagg on").
SETTING_WORDS = {
    "--gpu-memory-utilization": "0.5",
    "--kv-cache-dtype": "fp8",
    "--ray": None,
    "--local-paths": None,
    "--disagg on": None,
    "--prefill-tp": "2",
    "--decode-tp": "2",
    "--xpyd": "1:1",
}


def _unhonoured_cases() -> list[tuple[str, str, str | None]]:
    """(engine, flag, its value) for each of llmfit's engine settings the engine's line does not
    take, and the first knob of every other engine that llmfit's command line offers."""
    from llmfit.cli.shared import ENGINE_SETTINGS

    assert set(ENGINE_SETTINGS.values()) == set(SETTING_WORDS)
    out = []
    with toy_registered():
        for key in ENGINES:
            line = registered(key)
            out += [(key, f, SETTING_WORDS[f]) for f in SETTING_WORDS if f not in line.honours]
            for other in ENGINES:
                if other == key:
                    continue
                d = next(d for d in knobs.declared(options_class(other)) if d.knob.llmfit_flag)
                assert d.knob.llmfit_flag is not None
                out.append(
                    (key, d.knob.llmfit_flag, d.knob.example if d.knob.takes_value else None)
                )
    return out


@pytest.mark.parametrize(("key", "flag", "value"), _unhonoured_cases())
def test_a_setting_the_engine_does_not_take_is_refused_naming_both(run, key, flag, value):
    words = flag.split() + ([] if value is None else [value])
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", key, *words)
    assert (code, out) == (2, "")
    first = err.splitlines()[0]
    # One sentence, naming the flag and the engine that does not take it.
    assert first.startswith(f"llmfit: {flag} is ")
    title = registered(key).title
    assert f", and {title}, which this plan runs, does not honour it" in first, first
    assert first.endswith(".") and first.count(". ") == 0


def test_every_setting_an_engine_takes_passes_the_rule():
    from llmfit.plan.engines.honoured import takers, unhonoured

    for key in keys():
        for flag in registered(key).honours:
            assert key in takers(flag)
            assert unhonoured([(flag, takers(flag))], (key,)) is None


def test_the_refusals_read_as_written(run):
    # vLLM's knob in an SGLang plan, which SGLang's line maps to its own flag.
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", "sglang",
                       "--max-num-seqs", "8")  # fmt: skip
    assert code == 2
    assert err == (
        "llmfit: --max-num-seqs is vLLM's setting, and SGLang, which this plan runs, does not "
        "honour it: SGLang's own is --max-running-requests.\n"
        "hint: llmfit Qwen/Qwen3-8B --engine sglang --max-running-requests 8\n"
    )
    # SGLang's knob with no engine named: no default takes it (the toy, registered here, is one).
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--mem-fraction-static", "0.8")
    assert code == 2
    assert err == (
        "llmfit: --mem-fraction-static is SGLang's setting, and vLLM, llama.cpp and Toy, the "
        "engines planned when none is named, do not honour it.\n"
        "hint: leave --mem-fraction-static out, or plan with --engine sglang\n"
    )
    # The toy engine's line takes none of llmfit's engine settings.
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", "toy",
                       "--kv-cache-dtype", "fp8")  # fmt: skip
    assert code == 2
    assert err.splitlines()[0] == (
        "llmfit: --kv-cache-dtype is a setting of vLLM and SGLang, and Toy, which this plan runs, "
        "does not honour it."
    )
    # llama.cpp takes the share; vLLM's knob with no engine named is vLLM's to take.
    code, _, err = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", "1xrtx4090-24g",
                       "--engine", "llama.cpp", "--gpu-memory-utilization", "0.8")  # fmt: skip
    assert code == 0, err
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--max-num-seqs", "8")
    assert code == 0, err


def test_a_checked_command_s_engine_is_held_to_the_rule_too(run):
    code, _, err = run("check", "--fleet", "1xh100-80g", "--vllm-version", "0.30", "--",
                       "sglang", "serve", "--model-path", "Qwen/Qwen3-8B")  # fmt: skip
    assert code == 2
    assert err == (
        "llmfit: --vllm-version is vLLM's setting, and SGLang, which this plan runs, does not "
        "honour it.\nhint: leave --vllm-version out\n"
    )


def test_the_disaggregated_pins_are_taken_by_the_engines_that_launch_pairs(toy):
    # An engine takes --disagg on and its pins exactly where its layout space has pair rules
    # (plan/disagg.py pair_refusal: none is "launches no disaggregated prefill and decode").
    from llmfit.plan.engines.honoured import DISAGG_SETTINGS

    for key in keys():
        launches = engine(key).layouts.pairs is not None
        for flag in DISAGG_SETTINGS:
            assert (flag in registered(key).honours) == launches, (key, flag)


@pytest.mark.parametrize(
    "words",
    [("--prefill-tp", "2"), ("--decode-tp", "2"), ("--xpyd", "1:1"), ("--disagg", "on")],
)
def test_a_disaggregated_pin_is_refused_for_a_repository_only_llama_cpp_runs(run, words):
    # No engine named: vLLM, a default, takes the pin, but Tiny-Llama-GGUF's files are GGUF,
    # which llama.cpp alone runs, so the plan would drop it (a note, exit 0, before).
    code, out, err = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", "examples/fleet.toml",
                         *words)  # fmt: skip
    assert (code, out) == (2, "")
    flag = " ".join(words) if words[0] == "--disagg" else words[0]
    assert err == (
        f"llmfit: {flag} is a setting of vLLM and SGLang, and llama.cpp, which runs this "
        "repository's files, does not honour it: llama.cpp launches no disaggregated prefill and "
        f"decode.\nhint: leave {flag} out\n"
    )


def test_with_no_engine_named_the_engines_that_run_the_files_must_take_a_setting(run):
    # vLLM, a default, takes --ray; Tiny-Llama-GGUF's files run on llama.cpp alone, which would
    # drop it (its commands have no Ray form), so once the files are read it is refused.
    code, out, err = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", "1xrtx4090-24g", "--ray")
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: --ray is a setting of vLLM and SGLang, and llama.cpp, which runs this "
        "repository's files, does not honour it.\nhint: leave --ray out\n"
    )
    # --gpu-memory-utilization llama.cpp takes.
    code, _, err = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", "1xrtx4090-24g",
                       "--gpu-memory-utilization", "0.8")  # fmt: skip
    assert code == 0, err


def test_disagg_off_and_auto_ask_nothing_of_an_engine(run):
    for value in ("off", "auto"):
        code, _, err = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", "1xrtx4090-24g",
                           "--engine", "llama.cpp", "--disagg", value)  # fmt: skip
        assert code == 0, err


def test_the_help_of_an_engine_setting_follows_the_registry(run, toy):
    from llmfit.plan.engines import unregister

    # A line that takes --ray (the toy's, under another key) is named in its help as registered.
    register("toy-ray", replace(toy_engine.LINE, title="Toy Ray", honours=("--ray",)))
    try:
        code, out, _ = run("plan", "--help")
    finally:
        unregister("toy-ray")
    assert code == 0
    words = " ".join(out.split())
    assert "--ray Multi-node commands in the Ray form; taken by vLLM, SGLang and Toy Ray;" in words
    assert "KV cache dtype to plan (auto: the checkpoint's); taken by vLLM and SGLang;" in words
