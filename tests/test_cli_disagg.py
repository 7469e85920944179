"""`--disagg auto|on|off` and its pins on the command line: byte-identical plans where no
disaggregated option wins (every golden plan, and every one under --disagg off), the block and
the JSON where one does, and every printed role command read back by its engine's own grammar
(llmfit check's) and its router's flags.

Qwen3-235B-A22B: 94 layers, 4 KV heads of 128. Its fp8 KV cache (the what-if "fp8 weights and
KV cache") costs 2 × 94 × 4 × 128 × 1 B = 96,256 B a token; a 2,048-token prompt's KV is
197,132,288 B.
"""

from __future__ import annotations

import json
import shlex

import pytest

from llmfit.plan.engines import engine, split_env
from llmfit.plan.settings import PlanSettings
from tests.conftest import EXAMPLE_FLEET
from tests.render.test_golden import CASES, GOLDEN, NARROW, VIEWS, normalise

QWEN = ["Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET), "--rate", "20"]
SGLANG_2P1D = [*QWEN, "--engine", "sglang", "--xpyd", "2:1", "--prefill-tp", "2"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_disagg_off_prints_the_golden_plans_byte_for_byte(run, case):
    # The golden files are today's plans (the default, auto, prints them unchanged too:
    # tests/render/test_golden.py): --disagg off prints exactly them.
    code, out, err = run(*CASES[case], "--fleet", str(EXAMPLE_FLEET), "--disagg", "off")
    assert code == 0, err
    assert normalise(out) == (GOLDEN / f"{case}.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("case", sorted(NARROW))
def test_disagg_off_at_terminal_widths(run, monkeypatch, case, view):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = run(*NARROW[case], *VIEWS[view], "--disagg", "off")
    assert code == 0, err
    assert normalise(out) == (GOLDEN / f"{case}-{view}-120.txt").read_text(encoding="utf-8")


def test_where_no_load_is_named_a_unit_of_two_pools_never_wins(run):
    # With no load named the plan ranks by the fewest cards that serve the workload: 8 cards
    # for the best, where any unit is its workers' cards together. Asked for (--disagg on), the
    # block is there, with none winning; under auto it is not.
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET))
    assert code == 0 and "Disaggregated prefill and decode" not in out
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET), "--disagg", "on")
    assert code == 0 and "Disaggregated prefill and decode (--disagg off leaves it out)" in out


def test_a_winning_disaggregated_option_in_words(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run(*SGLANG_2P1D)
    assert code == 0, err
    lines = out.splitlines()
    head = lines.index(
        "Disaggregated prefill and decode (--disagg off leaves it out): the KV cache of each "
        "request moves from a prefill worker to a decode worker"
    )
    d1 = lines[head + 1]
    assert d1.startswith(
        "  D1 sglang (fp8 weights and KV cache) 2P1D: prefill 2 × 2 × h200-141g (tp2+ep), decode "
        "1 × 4 × h200-141g (tp4+ep), 8 cards, KV over NVLink · "
    )
    # The transfer: the decode worker of TP 4 holds one of the 4 KV heads a card (49,283,072 B),
    # each of the 2 prefill cards sends half the 197,132,288 B (98,566,144 B): over NVLink
    # (450 GB/s) 0.21904 ms, + 2 ms.
    prefill = next(x for x in lines if x.startswith("  prefill: 2 workers of 2 × h200-141g"))
    assert "2.2 ms KV transfer (197 MB over NVLink)" in prefill
    # The launch: the three workers on one node's 8 cards, then the router.
    at = lines.index("# all on one node of 8 cards or more, each worker on its own cards")
    assert lines[at + 1 :: 2][:4] == ["# prefill-1", "# prefill-2", "# decode-1",
                                      "# router, in front of them"]  # fmt: skip
    assert lines[at + 8] == (
        "python -m sglang_router.launch_router --pd-disaggregation --prefill "
        "http://localhost:8100 8998 --prefill http://localhost:8101 8999 --decode "
        "http://localhost:8200 --host 0.0.0.0 --port 8000"
    )


def test_the_json_adds_the_roles_only_where_one_is_listed(run):
    code, out, _ = run(*SGLANG_2P1D, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == 1
    (d1,) = [d for d in doc["disaggregated"] if d["name"] == "D1"]
    assert (d1["engine"], d1["xpyd"], d1["gpus"]) == ("sglang", "2P1D", 8)
    prefill, decode = d1["roles"]
    assert (prefill["role"], prefill["workers"], prefill["gpus_per_worker"], prefill["tp"]) == (
        "prefill", 2, 2, 2)  # fmt: skip
    assert (decode["role"], decode["workers"], decode["gpus_per_worker"], decode["tp"]) == (
        "decode", 1, 4, 4)  # fmt: skip
    # The unit serves the lesser of its pools: 2 prefill workers' capacity and 1 decode worker's.
    assert d1["rate"] == pytest.approx(min(2 * prefill["capacity_rate"], decode["capacity_rate"]))
    x = d1["kv_transfer"]
    assert (x["bytes"], x["per_decode_card"], x["per_prefill_card"]) == (
        197_132_288, 49_283_072, 98_566_144)  # fmt: skip
    assert (x["link"], x["bandwidth"], x["latency_s"]) == ("node", 450e9, 0.002)
    assert x["seconds"] == pytest.approx(0.002 + 98_566_144 / 450e9)
    assert [c["role"] for c in d1["commands"]] == ["prefill", "prefill", "decode", "router"]
    # A plan with none listed is the document it was: no key at all.
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET), "--json")
    assert code == 0 and "disaggregated" not in json.loads(out)


def _roles(doc: dict) -> list[dict]:
    return [c for d in doc["disaggregated"] for c in d["commands"]]


@pytest.mark.parametrize("extra", [[], ["--engine", "sglang"]], ids=["vllm", "sglang"])
def test_every_role_command_reads_back_with_its_engines_own_flags(run, extra):
    code, out, _ = run(*QWEN, "--disagg", "on", "--json", *extra)
    assert code == 0
    workers = [c for c in _roles(json.loads(out)) if c["role"] != "router"]
    assert workers
    for c in workers:
        words = shlex.split(c["shell"])
        env, argv = split_env(words)
        assert argv == c["argv"]
        e = engine("sglang" if extra else "vllm")
        # llmfit check's reader: the engine's own parser (vLLM 0.34's, SGLang 0.5.23's), which
        # refuses any flag the engine does not define, and a choice outside its set.
        request = e.read_command(argv, PlanSettings(), env)
        assert request.repo == "Qwen/Qwen3-235B-A22B"
        if extra:
            mode = argv[argv.index("--disaggregation-mode") + 1]
            assert mode == c["role"]
            assert argv[argv.index("--disaggregation-transfer-backend") + 1] in (
                "mooncake", "mooncake_tcp")  # fmt: skip
        else:
            config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
            assert config == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
            assert "VLLM_NIXL_SIDE_CHANNEL_PORT" in env


@pytest.mark.parametrize("extra", [[], ["--engine", "sglang"]], ids=["vllm", "sglang"])
def test_the_router_line_names_every_worker(run, extra):
    code, out, _ = run(*QWEN, "--disagg", "on", "--json", *extra)
    doc = json.loads(out)
    for d in doc["disaggregated"]:
        workers = [c for c in d["commands"] if c["role"] != "router"]
        (router,) = [c for c in d["commands"] if c["role"] == "router"]
        words = shlex.split(router["shell"])
        # vllm-router 0.1.17 (vllm_router/router_args.py): --vllm-pd-disaggregation, --prefill
        # URL (nargs +, append), --decode URL (append); sglang_router 0.3.2 the same with
        # --pd-disaggregation and a prefill's bootstrap port after its URL.
        if extra:
            assert words[:4] == ["python", "-m", "sglang_router.launch_router",
                                 "--pd-disaggregation"]  # fmt: skip
        else:
            assert words[:2] == ["vllm-router", "--vllm-pd-disaggregation"]
        urls = [words[i + 1] for i, w in enumerate(words) if w in ("--prefill", "--decode")]
        ports = [c["argv"][c["argv"].index("--port") + 1] for c in workers]
        assert [u.rsplit(":", 1)[1] for u in urls] == ports
        assert words[-4:] == ["--host", "0.0.0.0", "--port", "8000"]


def test_bad_pins_are_one_sentence(run):
    code, _, err = run(*QWEN, "--xpyd", "2x1")
    assert code == 2
    assert (
        "--xpyd '2x1' is not X:Y, the prefill workers to the decode workers of a unit (2:1)."
    ) in err
    code, _, err = run(*QWEN, "--disagg", "off", "--decode-tp", "4")
    assert code == 2
    assert "--disagg off plans no disaggregated layout" in err
    code, _, err = run(*QWEN, "--xpyd", "0:1")
    assert code == 2 and "--xpyd 0:1: each side must be 1 to 64 workers." in err


def test_llama_cpp_says_it_has_none(run):
    # --disagg on is a setting only engines that launch prefill and decode apart take (the one
    # rule, plan/engines/honoured.py): a GGUF repository runs on llama.cpp alone, so it is
    # refused, where the plan once dropped it with a note.
    code, out, err = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", str(EXAMPLE_FLEET),
                         "--context", "4096", "--rate", "5", "--disagg", "on")  # fmt: skip
    assert (code, out) == (2, "")
    assert "llama.cpp launches no disaggregated prefill and decode." in err


KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _vllm(tp: int, *extra: str) -> list[str]:
    return ["vllm", "serve", "Qwen/Qwen3-235B-A22B", "-tp", str(tp), "--enable-expert-parallel",
            "--kv-transfer-config", KV, *extra]  # fmt: skip


def test_check_reads_a_pair_of_role_commands(run):
    # TP 4 prefill, TP 8 decode: vLLM's NixlConnector reads a decode rank's heads from the
    # prefill rank that holds them (each TP a multiple of the other).
    code, out, err = run("check", "--fleet", "8xh200-141g", "--", *_vllm(4), "--", *_vllm(8))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "# prefill" and lines[1].startswith(
        "$ vllm serve Qwen/Qwen3-235B-A22B -tp 4"
    )
    assert "# decode" in lines
    assert lines[-1] == "the pair: one disaggregated deployment its engine launches"


@pytest.mark.parametrize(
    ("prefill", "decode", "why"),
    [
        # Qwen3-235B has 4 KV heads: a prefill of TP 8 holds each twice, which vLLM 0.34's NIXL
        # handshake refuses to send to a narrower decode (nixl/base_worker.py
        # `_validate_remote_agent_handshake`).
        (_vllm(8), _vllm(4), "vLLM cannot launch it: a prefill of TP 8 replicates the model's 4 "
         "KV heads and may not feed a narrower decode of TP 4"),
        (_vllm(2), _vllm(3), "vLLM cannot launch it: its prefill and decode tensor-parallel sizes "
         "(2 and 3) must each divide the other"),
        (_vllm(4), _vllm(8, "--kv-cache-dtype", "fp8"), "the prefill command's KV cache dtype is "
         "auto and the decode command's fp8: both must keep one"),
        (["vllm", "serve", "Qwen/Qwen3-235B-A22B", "-tp", "4"], _vllm(4),
         "the prefill command has no --kv-transfer-config, so vLLM serves it whole"),
        (["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
          "--disaggregation-mode", "decode"],
         ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
          "--disaggregation-mode", "decode"],
         "the prefill command's role is 'decode', not prefill"),
        (_vllm(4), ["vllm", "serve", "Qwen/Qwen3-8B", "--kv-transfer-config", KV],
         "the prefill command serves Qwen/Qwen3-235B-A22B and the decode command Qwen/Qwen3-8B: "
         "both must serve one model"),
    ],
)  # fmt: skip
def test_check_refuses_a_pair_its_engine_refuses_in_one_sentence(run, prefill, decode, why):
    code, out, err = run("check", "--fleet", "8xh200-141g", "--", *prefill, "--", *decode)
    assert code == 2
    assert out == ""
    assert f"the pair of commands cannot run as prefill and decode: {why}." in err


def test_explain_splits_the_disaggregated_option(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = run(*SGLANG_2P1D, "--explain")
    assert code == 0
    lines = out.splitlines()
    at = lines.index("D1 worked out: prefill and decode on separate workers (mooncake, nixl)")
    # The transfer, by hand (the module's docstring): 197,132,288 B, 49,283,072 B a decode card
    # of TP 4 (one of 4 KV heads), 98,566,144 B each of the 2 prefill cards, over NVLink.
    assert lines[at + 4] == (
        "  KV transfer: 2,048 prompt tokens × 96,256 B a token of the layers moved = 197 MB; a "
        "decode card receives 49 MB, the busiest prefill card sends 99 MB, over NVLink at 450.0 "
        "GB/s a card, plus 2.0 ms: 2.2 ms"
    )
    assert lines[at + 3].startswith("  2P1D: 2 × ")


def test_a_burst_is_not_planned_disaggregated_and_says_so_when_asked():
    # A burst of requests sent at once is served in waves, not the steady state two pools
    # share: asked for by name, the plan says why there is none (and under auto says nothing).
    from llmfit.plan.planner import _disaggregated
    from llmfit.plan.settings import Disagg, Workload

    burst = Workload(requests=100)
    asked = PlanSettings(workload=burst, disagg=Disagg("on"))
    assert _disaggregated([object()], None, [], ["vllm"], asked) == ((), (  # type: ignore[arg-type]
        "disaggregated prefill and decode is planned for a steady load (--rate, --concurrency), "
        "not a burst of requests sent at once",
    ))  # fmt: skip
    auto = PlanSettings(workload=burst)
    assert _disaggregated([object()], None, [], ["vllm"], auto) == ((), ())  # type: ignore[arg-type]


def test_a_pair_is_checked_in_words_or_json_not_as_a_launch(run):
    code, _, err = run("check", "--format", "k8s", "--fleet", "8xh200-141g", "--", *_vllm(4),
                       "--", *_vllm(8))  # fmt: skip
    assert code == 2
    assert "a pair of commands is checked in words or --json: --format takes one command." in err


RULES = ["engine", "prefill role", "decode role", "model", "kv cache dtype", "precision",
         "layouts"]  # fmt: skip


def test_check_json_of_a_pair_gives_each_role_and_every_rule(run):
    # TP 4 prefill, TP 8 decode of Qwen3-235B-A22B (4 KV heads): every rule holds (the layouts
    # as in test_check_reads_a_pair_of_role_commands), both fit on the 8 H200s, exit 0.
    code, out, err = run("check", "--json", "--fleet", "8xh200-141g", "--", *_vllm(4), "--",
                         *_vllm(8))  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == 1
    assert doc["pair"] == {
        "launches": True, "fits": True, "refusal": None,
        "rules": [{"rule": r, "holds": True, "why": None} for r in RULES],
    }  # fmt: skip
    # Each role is the document `llmfit check --json` prints for its command alone.
    _, alone, _ = run("check", "--json", "--fleet", "8xh200-141g", "--", *_vllm(4))
    assert doc["roles"]["prefill"] == json.loads(alone)
    prefill, decode = doc["roles"]["prefill"]["options"], doc["roles"]["decode"]["options"]
    assert (prefill[0]["tp"], decode[0]["tp"]) == (4, 8)


def test_check_json_of_a_refused_pair_says_which_rule_breaks(run):
    # TP 8 prefill into TP 4 decode: the KV heads' rule breaks (the refusal's sentence as in
    # words, on stderr, exit 2), every rule before it holds.
    code, out, err = run("check", "--json", "--fleet", "8xh200-141g", "--", *_vllm(8), "--",
                         *_vllm(4))  # fmt: skip
    assert code == 2
    why = ("vLLM cannot launch it: a prefill of TP 8 replicates the model's 4 KV heads and may "
           "not feed a narrower decode of TP 4")  # fmt: skip
    assert f"the pair of commands cannot run as prefill and decode: {why}." in err
    pair = json.loads(out)["pair"]
    assert (pair["launches"], pair["fits"], pair["refusal"]) == (False, True, why)
    assert pair["rules"][-1] == {"rule": "layouts", "holds": False, "why": why}
    assert all(r["holds"] for r in pair["rules"][:-1])


def test_check_json_of_two_engines_leaves_the_engines_rules_unchecked(run):
    # vLLM's prefill and SGLang's decode: no one engine, so neither command's role nor the
    # layouts are checked (null); the model, dtype and precision are.
    sglang = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-235B-A22B",
              "--tp-size", "8", "--disaggregation-mode", "decode"]  # fmt: skip
    code, out, err = run("check", "--json", "--fleet", "8xh200-141g", "--", *_vllm(4), "--",
                         *sglang)  # fmt: skip
    assert code == 2
    pair = json.loads(out)["pair"]
    assert pair["refusal"] == (
        "the prefill command runs vLLM and the decode command SGLang: one engine runs both"
    )
    assert [(r["rule"], r["holds"]) for r in pair["rules"]] == [
        ("engine", False), ("prefill role", None), ("decode role", None), ("model", True),
        ("kv cache dtype", True), ("precision", True), ("layouts", None),
    ]  # fmt: skip
