"""Issue 27, "a plan you can act on without a second look": each item's command, run as the issue
ran it, and the corrected output it now prints."""

from __future__ import annotations

import json

import yaml

from tests.conftest import EXAMPLE_FLEET

# -- 1. --option N is the option shown in full and launched, with or without --commands ---------


def _row_where(out: str, number: int) -> str:
    """The `where` cell of table row `number` (its line starts with the number)."""
    for line in out.splitlines():
        if line.split()[:1] == [str(number)]:
            return line
    raise AssertionError(f"no row {number} in:\n{out}")


def test_option_n_with_format_k8s_prints_that_options_yaml(run):
    # Two classes of card and the checkpoint as stored: two options, one on each class.
    args = ("Qwen/Qwen3-8B", "--fleet", "1xh200-141g,1xl40s-48g", "--precision", "stored")
    code, table, err = run(*args)
    assert code == 0, err
    second = "l40s-48g" if "l40s-48g" in _row_where(table, 2) else "h200-141g"
    first = {"l40s-48g": "h200-141g", "h200-141g": "l40s-48g"}[second]
    code, out, err = run(*args, "--option", "2", "--format", "k8s")
    assert code == 0, err
    assert f"Option 2: 1 × {second}, bf16," in out
    assert "Best:" not in out
    yaml_text = out[out.index("# Qwen/Qwen3-8B: ") :]
    assert yaml_text.startswith(f"# Qwen/Qwen3-8B: 1 × {second}, safetensors\n")
    deployment = next(d for d in yaml.safe_load_all(yaml_text) if d)
    assert deployment["metadata"]["annotations"]["llmfit/where"] == f"1 × {second}"
    assert first not in yaml_text
    # The same YAML as --commands gives for that option.
    code, alone, _ = run(*args, "--option", "2", "--format", "k8s", "--commands")
    assert alone.strip() == yaml_text.strip()


def test_option_n_without_a_format_prints_that_options_command(run):
    code, out, err = run(
        "Qwen/Qwen3-8B", "--fleet", str(EXAMPLE_FLEET), "--precision", "stored", "--option", "3"
    )
    assert code == 0, err
    where = _row_where(out, 3)
    assert "Option 3: 1 × " in out
    shown = out[out.index("Option 3: 1 × ") :].split(",")[0].removeprefix("Option 3: ")
    assert shown in where
    # Its launch, not the best one's: one vllm serve line at the end.
    assert out.rstrip().splitlines()[-1].startswith("vllm serve Qwen/Qwen3-8B ")


# -- 10. --gpu-memory-utilization is vLLM's; SGLang's share is its own flag ----------------------


def test_gpu_memory_utilization_for_sglang_is_refused_with_sglangs_own_flag(run):
    code, out, err = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", "sglang",
        "--gpu-memory-utilization", "0.7",
    )  # fmt: skip
    assert code == 2
    assert out == ""
    # The one rule for a setting the plan's engine does not take (plan/engines/honoured.py):
    # vLLM and llama.cpp take the share, SGLang's registry line names its own flag for it.
    assert err == (
        "llmfit: --gpu-memory-utilization is a setting of vLLM and llama.cpp, and SGLang, which "
        "this plan runs, does not honour it: SGLang's own is --mem-fraction-static.\n"
        "hint: llmfit Qwen/Qwen3-8B --engine sglang --mem-fraction-static 0.7\n"
    )
    # Beside vLLM too: the SGLang options would not have it, in the same table.
    code, _, _ = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", "sglang", "--engine", "vllm",
        "--gpu-memory-utilization", "0.7",
    )  # fmt: skip
    assert code == 2


def test_sglangs_own_share_is_passed_and_vllms_is_still_taken(run):
    code, out, err = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", "sglang", "--precision", "stored",
        "--mem-fraction-static", "0.7",
    )  # fmt: skip
    assert code == 0, err
    assert out.rstrip().splitlines()[-1] == (
        "sglang serve --model-path Qwen/Qwen3-8B --tp-size 1 --context-length 40960 "
        "--mem-fraction-static 0.700 --host 0.0.0.0 --port 30000"
    )
    code, out, err = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--precision", "stored",
        "--gpu-memory-utilization", "0.7",
    )  # fmt: skip
    assert code == 0, err
    assert out.rstrip().endswith("--gpu-memory-utilization 0.70")


# -- 7. What a person sees: 80 columns, piped output, the fleet's bars, one label grammar --------


def _unwrapped(text: str) -> str:
    return " ".join(text.split())


def test_at_80_columns_busy_options_still_say_so(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run("deepseek-ai/DeepSeek-V3", "--fleet", str(EXAMPLE_FLEET), "--all")
    assert code == 0, err
    lines = out.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("# artifact"))
    assert header.split()[-1] == "now"
    # The four h100 nodes on ib1 each have 4 of their 8 cards in use (examples/fleet.toml): a
    # layout of whole 8-card nodes there cannot run now, one of 4 cards a node can.
    rows = [line for line in lines if line[:2].strip().isdigit()]
    whole = [row for row in rows if "nodes × 8 h100-80g" in row]
    halves = [row for row in rows if "nodes × 4 h100-80g" in row]
    # (6 whole-node layouts: FlashInfer's MoE scratch under data parallelism, issue 32, leaves
    # two of the data-parallel ones over 2 × 8 H100s without room.)
    assert len(whole) == 6 and len(halves) == 2
    assert all(row.rstrip().endswith(" busy") for row in whole), whole
    assert all(row.rstrip().endswith(" free") for row in halves), halves
    assert rows[0].rstrip().endswith(" free")
    # The columns it did leave out are named under the table, with what the engine's said.
    assert (
        "not shown at 80 columns (every column is at 120): hosts, bits, tok/s, engine (vllm for "
        "all), meets (yes for all), max ctx" in _unwrapped(out)
    )


def test_at_80_columns_a_column_that_says_the_same_on_every_row_is_named_with_it(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--precision", "stored")
    assert code == 0
    assert (
        "not shown at 80 columns (every column is at 120): hosts, bits, tok/s, engine (vllm for "
        "all), meets (yes for all), now (all free), max ctx" in _unwrapped(out)
    )
    # At 120, every column and no such line.
    monkeypatch.setenv("COLUMNS", "120")
    _, wide, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--precision", "stored")
    assert "not shown" not in wide
    assert _header(wide)[-2:] == ["hosts", "now"]


def _header(out: str) -> list[str]:
    return next(line for line in out.splitlines() if line.startswith("# artifact")).split()


def _no_terminal(monkeypatch, widths: dict[int, int]) -> None:
    import os

    def size(fd: int = 1) -> os.terminal_size:
        if fd in widths:
            return os.terminal_size((widths[fd], 40))
        raise OSError("not a terminal")

    monkeypatch.setattr(os, "get_terminal_size", size)


def test_piped_output_with_no_columns_and_no_terminal_is_80_wide(run, monkeypatch):
    monkeypatch.delenv("COLUMNS")
    _no_terminal(monkeypatch, {})
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET))
    assert code == 0
    drawn = [line for line in out.splitlines() if not line.startswith("vllm serve ")]
    assert max(len(line) for line in drawn) <= 80
    # The table as at 80 columns: no bits column, and the line that says so.
    assert "not shown at 80 columns" in out


def test_piped_output_takes_the_width_of_the_terminal_stderr_is_on(run, monkeypatch):
    # `llmfit … | less`: stdout is the pipe, stderr the terminal, 100 columns wide.
    monkeypatch.delenv("COLUMNS")
    _no_terminal(monkeypatch, {2: 100})
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--precision", "stored")
    assert code == 0
    header = _header(out)
    assert "bits" in header and "hosts" not in header
    assert "not shown at 100 columns (every column is at 120): hosts" in _unwrapped(out)


def test_the_fleets_bars_fit_80_columns(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run("fleet", str(EXAMPLE_FLEET))
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80
    # The table is 68 wide, so 10 cells a bar: the h100s, 16 of 32 cards used, are half used.
    h100 = next(line for line in out.splitlines() if line.startswith("h100-80g "))
    assert h100.endswith("  " + "█" * 5 + "░" * 5)
    assert out.splitlines()[out.splitlines().index(h100) + 3].strip() == (
        "█ used  ░ free  × unhealthy"
    )


def test_one_label_grammar_names_every_size_above_one():
    from llmfit.plan.layout import Layout

    assert Layout().short() == ""
    assert Layout(tp=8).short() == "tp8"
    assert Layout(tp=8, pp=2, nodes=2).short() == "tp8×pp2"
    assert Layout(tp=2, dp=4, ep=True).short() == "tp2×dp4+ep"
    assert Layout(dp=8, ep=True).short() == "dp8+ep"
    # Expert parallelism spreads experts over tp × dp ranks: a pipeline of one card a stage
    # spreads none, so its label does not claim it.
    assert Layout(pp=11, ep=True, nodes=11).short() == "pp11"
    assert Layout(tp=4, pp=3, ep=True, nodes=3).label() == " (tp4×pp3+ep)"


def test_tensor_parallel_and_data_parallel_rows_are_labelled_alike_and_a_dense_model_has_no_ep(
    run,
):
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--all", "--precision", "stored")
    assert code == 0
    for where in ("2 × h100-80g (tp2)", "2 × h100-80g (dp2)", "8 × h100-80g (tp8)",
                  "8 × h100-80g (tp2×dp4)"):  # fmt: skip
        assert f" vllm   {where} " in out, where
    assert " vllm   1 × h100-80g " in out
    assert "+ep" not in out


def test_the_table_and_explain_say_a_layout_alike(run):
    code, out, _ = run(
        "meta-llama/Meta-Llama-3.1-405B", "--fleet", "2x8xh100-80g@ib0", "--precision", "stored",
        "--context", "8k", "--explain",
    )  # fmt: skip
    assert code == 0
    assert out.startswith("Option 1: 2 nodes × 8 h100-80g on ib0 (tp8×pp2), bf16,")
    assert "  the fullest card of 16 (tp8×pp2):" in out.splitlines()


# -- 5. llmfit models: parameter counts, the trained-context mark, "1 GPU", the order asked ------


def test_max_params_counts_safetensors_repositories_and_leaves_out_the_big_ones(run):
    code, out, err = run("models", "--fleet", str(EXAMPLE_FLEET), "--max-params", "70b")
    assert code == 0, err
    listed = out.split("\n\n", 1)[1]
    for big in ("Meta-Llama-3.1-405B", "Qwen/Qwen3-235B-A22B", "DeepSeek-V3", "Kimi-K2"):
        assert big not in listed, big
    # 70b is every count that reads as 70 billion: Llama-3.1-70B's 2 × 70,553,706,496 bytes of
    # bf16 are 70.55 billion parameters, within it.
    assert "meta-llama/Meta-Llama-3.1-70B" in listed
    # Over 70,999,999,999: from their indexes, Qwen3-235B-A22B (235.1 billion) and
    # Meta-Llama-3.1-405B (405.9); from their configs, Qwen2.5-72B (72.7), Qwen3-235B-A22B-FP8
    # and -NVFP4 (235.1), Qwen3-Next-80B (79.6), DeepSeek-R1 and -V3 (671.0), Llama-4-Scout
    # (107.8), Kimi-K2 (1,026), gpt-oss-120b (116.8) and GLM-4.5-Air (106.9): 12.
    assert "12 models over --max-params not shown" in out


def test_the_params_column_is_counted_from_the_index(run):
    code, out, _ = run("models", "--fleet", "1xh100-80g")
    assert code == 0
    # Qwen3-8B's index: 16,381,470,720 bytes of bf16, 8,190,735,360 parameters.
    row = next(line for line in out.splitlines() if " Qwen/Qwen3-8B " in line)
    assert row.split()[2] == "8.2B"
    # One card is "1 GPU".
    assert out.splitlines()[0].endswith("· 1 node · 1 GPU")


def test_a_context_past_the_trained_one_is_marked(run):
    code, out, _ = run("models", "--fleet", "1xh100-80g", "--context", "64k")
    assert code == 0
    rows = {line.split()[1]: line for line in out.splitlines() if line[:2].strip().isdigit()}
    # Qwen3-8B was trained for 40,960 tokens, Mixtral for 32,768: both are marked at 65,536;
    # Llama-3.1-8B (131,072) is not.
    assert "65,536*" in rows["Qwen/Qwen3-8B"]
    assert "65,536*" in rows["mistralai/Mixtral-8x7B-v0.1"]
    assert "*" not in rows["meta-llama/Llama-3.1-8B-Instruct"]
    said = " ".join(out.split())
    assert (
        "* a context of 65,536 is past the one these were trained for (llmfit-fixtures/Tiny-Llama-"
        "GGUF 8,192, Qwen/Qwen3-8B 40,960, Qwen/Qwen3-30B-A3B 40,960, " in said
    )
    assert "mistralai/Mixtral-8x7B-v0.1 32,768)" in said
    assert "answers past it may degrade" in said


def test_the_listing_is_in_the_order_asked(run):
    import re

    def rows(out: str) -> list[tuple[str, int, str, float]]:
        found = []
        for line in out.splitlines():
            cells = line.split()
            if cells[:1] and cells[0].isdigit() and len(cells) > 6:
                cards = int(re.search(r" (\d+) × ", line).group(1))
                what_if = "fp8 weights" in line or "KV cache" in line
                # ... seqs tok/s/GPU meets now: the sequences held are the fourth from the end.
                found.append((cells[1], cards, what_if, float(cells[-4])))
        return found

    code, out, _ = run("models", "--fleet", "1xh100-80g", "--rank", "cards")
    assert code == 0
    listed = rows(out)
    # --rank cards, one card each: the checkpoints as shipped by the sequences they hold, most
    # first; then the what-ifs. gpt-oss-20b, which holds the most, is first.
    shipped = [r for r in listed if not r[2]]
    assert shipped[0][0] == "openai/gpt-oss-20b"
    assert [r[3] for r in shipped] == sorted((r[3] for r in shipped), reverse=True)
    assert listed.index(shipped[-1]) < min(listed.index(r) for r in listed if r[2])
    # By default (--rank serve), as `llmfit REPO` ranks: every one serves the chat workload on
    # its card, so the checkpoints as shipped go by what a unit of load costs, the most output
    # tokens a second a card first; then the what-ifs.
    _, out, _ = run("models", "--fleet", "1xh100-80g", "--json")
    best = [(d["repo"]["id"], d["options"][0]) for d in json.loads(out) if d["options"]]
    assert all(o["serving"]["meets"] for _, o in best)
    as_shipped = [o for _, o in best if not o["what_if"]]
    assert best[: len(as_shipped)] == [(i, o) for i, o in best if not o["what_if"]]
    per_gpu = [o["serving"]["output_tokens_per_s_per_gpu"] for o in as_shipped]
    # Six under vLLM 0.34, whose measured cache gives each card its whole memory (five at 0.90).
    assert per_gpu == sorted(per_gpu, reverse=True) and len(per_gpu) == 6
    # --rank concurrency: the most sequences first whatever the what-if.
    _, out, _ = run("models", "--fleet", "1xh100-80g", "--rank", "concurrency")
    held = [r[3] for r in rows(out)]
    assert held == sorted(held, reverse=True)


# -- 2. A pin that removes every layout says which rule did, and the nearest layout that fits ---

NO_FABRIC = (
    "16 cards are more than a h100-80g node's 8, and these nodes have no fabric, so a replica "
    'cannot span them: give them one (fabric = "ib0" in a fleet file; inline, @ib0 as in '
    "2x8xh100-80g@ib0)"
)


def test_check_of_two_nodes_without_a_fabric_says_why(run):
    argv = (
        "--", "vllm", "serve", "meta-llama/Meta-Llama-3.1-405B", "--tensor-parallel-size", "8",
        "--pipeline-parallel-size", "2", "--max-model-len", "8192",
    )  # fmt: skip
    code, out, _ = run("check", "--fleet", "2x8xh100-80g", *argv)
    assert code == 1
    lines = out.splitlines()
    at = lines.index("does not fit:")
    assert " ".join(" ".join(lines[at + 1 : at + 3]).split()) == (
        f"16 × h100-80g (tp8×pp2): {NO_FABRIC}"
    )
    code, out, _ = run("check", "--fleet", "2x8xh100-80g", "--json", *argv)
    doc = json.loads(out)
    assert {r["reason"] for r in doc["rejected"]} == {NO_FABRIC}
    assert doc["unplaced"][0]["reason"] == f"16 × h100-80g (tp8×pp2): {NO_FABRIC}"
    # On the same nodes on a fabric, the same command fits: two nodes of eight.
    code, out, _ = run("check", "--fleet", "2x8xh100-80g@ib0", *argv)
    assert code == 0
    assert out.splitlines()[1].startswith("fits: 16 cards of h100-80g")


def test_a_width_that_does_not_divide_the_heads_says_so_not_cpu_nodes(run):
    # Qwen3-235B-A22B has 64 attention heads (config.json): 3 does not divide them.
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET), "--tp", "3")
    assert code == 1
    said = " ".join(out.split())
    assert (
        "safetensors: 3 × a100-80g (tp3): Total number of attention heads (64) must be divisible "
        "by tensor parallel size (3)." in said
    )
    assert "CPU node" not in said.split("fleet:", 1)[1].split("note:")[0]
    assert "safetensors: safetensors weights are planned" not in said
    # The nearest layout that fits, and the pin that gives it: the best ranked two wide
    # (tests/golden/moe.txt: two-wide attention four times over on the eight H200s).
    assert "nearest that fits: 8 × h200-141g (tp2×dp4+ep), bf16" in said
    assert said.endswith("(--tp 2)")


def test_why_not_names_the_heads_a_width_does_not_divide(run):
    # Qwen3-8B: 32 attention heads, 8 KV heads.
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--tp", "3", "--why-not")
    assert code == 1
    said = " ".join(out.split())
    assert (
        "3 × h100-80g (tp3): Total number of attention heads (32) must be divisible by tensor "
        "parallel size (3)." in said
    )
    assert "No way was refused" not in said
    assert "safetensors: nearest that fits: 2 × h100-80g (tp2), bf16," in said


def test_data_parallel_ranks_of_pipelines_are_refused_by_their_rule(run):
    code, out, _ = run(
        "Qwen/Qwen3-8B", "--vllm-version", "0.33",
        "--fleet", "8xh100-80g", "--tp", "2", "--pp", "2", "--dp", "4",
        "--precision", "stored",
    )  # fmt: skip
    assert code == 1
    said = " ".join(out.split())
    assert (
        "safetensors: 16 × h100-80g (tp2×pp2×dp4): data-parallel ranks are planned as one "
        "tensor-parallel group each, not as pipelines of stages (give the ranks or the stages, "
        "not both)" in said
    )
    # Nearest: the layout with two of the three sizes, tp 2 and dp 4, on the node's 8 cards.
    assert said.endswith(
        "nearest that fits: 8 × h100-80g (tp2×dp4), bf16, 12.2 GiB a card (59.1 free) "
        "(--tp 2 --pp 1 --dp 4)"
    )
    _, why, _ = run(
        "Qwen/Qwen3-8B", "--vllm-version", "0.33",
        "--fleet", "8xh100-80g", "--tp", "2", "--pp", "2", "--dp", "4",
        "--precision", "stored", "--why-not",
    )  # fmt: skip
    assert "No way was refused" not in why
    assert "data-parallel ranks are planned as one tensor-parallel group each" in why
    assert "nearest that fits: 8 × h100-80g (tp2×dp4)" in " ".join(why.split())


def test_pipeline_stages_alone_are_planned_as_asked(run):
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--pp", "2", "--precision",
                       "stored")  # fmt: skip
    assert code == 0
    rows = [line for line in out.splitlines() if line.split()[:1] and line.split()[0].isdigit()]
    assert rows and all("pp2" in row for row in rows)
    assert " --pipeline-parallel-size 2 " in out.rstrip().splitlines()[-1]


def test_expert_parallelism_asked_of_a_dense_model_is_said_and_left_out(run):
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "2xh100-80g", "--ep", "--precision", "stored")
    assert code == 0
    assert (
        "note: expert parallelism is asked for, but the model is not a mixture of experts: there "
        "are no experts to spread, so it is left out of the layouts" in " ".join(out.split())
    )
    assert "--enable-expert-parallel" not in out
    # A checked command that passes it (vLLM accepts and ignores it on a dense model) fits.
    code, out, _ = run(
        "check", "--fleet", "2xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2",
        "--enable-expert-parallel",
    )  # fmt: skip
    assert code == 0
    assert out.splitlines()[1].startswith("fits: 2 cards of h100-80g")


# -- 3. Pins for a GGUF file: llama.cpp's meaning of each, or one sentence ------------------------

GGUF = "llmfit-fixtures/Tiny-Llama-GGUF"


def _labels(run, *pins: str) -> set[str]:

    code, out, err = run(GGUF, "--fleet", "8xrtx4090-24g", *pins, "--json", "--all")
    assert code == 0, err
    return {o["label"] for o in json.loads(out)["options"]}


def test_gguf_gpus_is_the_cards_of_a_split_or_of_servers(run):
    # --gpus 4: four cards, as one server over all four (its layers split by count: pp4), two
    # servers of two, or four of one; never the CPU or one card.
    assert _labels(run, "--gpus", "4") == {
        "4 × rtx4090-24g (pp4)", "4 × rtx4090-24g (pp2×dp2)", "4 × rtx4090-24g (dp4)",
    }  # fmt: skip


def test_gguf_pp_is_the_cards_a_server_splits_its_layers_over(run):
    # --pp 2: each server on two cards, one to four of them on the node's eight.
    assert _labels(run, "--pp", "2") == {
        "2 × rtx4090-24g (pp2)", "4 × rtx4090-24g (pp2×dp2)", "6 × rtx4090-24g (pp2×dp3)",
        "8 × rtx4090-24g (pp2×dp4)",
    }  # fmt: skip
    code, out, _ = run(GGUF, "--fleet", "8xrtx4090-24g", "--pp", "2", "--commands")
    assert code == 0
    assert " --tensor-split 1,1 " in out.splitlines()[0]


def test_gguf_dp_is_independent_servers(run):
    # --dp 4: four servers, of one card or of two (4 × 2 = 8 cards).
    assert _labels(run, "--dp", "4") == {"4 × rtx4090-24g (dp4)", "8 × rtx4090-24g (pp2×dp4)"}
    code, out, _ = run(GGUF, "--fleet", "8xrtx4090-24g", "--dp", "4", "--commands")
    assert code == 0
    lines = [line for line in out.splitlines() if "llama-server" in line]
    assert len(lines) == 4
    assert lines[0].startswith("CUDA_VISIBLE_DEVICES=0 llama-server ")
    assert lines[3].startswith("CUDA_VISIBLE_DEVICES=3 llama-server ")
    assert [line.split()[-1] for line in lines] == ["8080", "8081", "8082", "8083"]


def test_gguf_tensor_parallelism_is_refused_in_one_sentence(run):
    code, out, _ = run(GGUF, "--fleet", "8xrtx4090-24g", "--tp", "2", "--precision", "stored")
    assert code == 1
    said = " ".join(out.split())
    assert (
        "Tiny-Llama-Q4_K_M.gguf: --tp 2: llama.cpp splits a GGUF file over cards by layers "
        "(--tensor-split), not by tensor parallelism; --gpus 2 (or --pp 2) puts its layers on 2 "
        "cards" in said
    )
    assert "nearest that fits: 1 × rtx4090-24g, Q4_K_M," in said
    # --tp 1 is every llama.cpp layout: it narrows nothing.
    assert _labels(run, "--tp", "1") == _labels(run)


def test_gguf_expert_parallelism_is_refused_in_one_sentence(run):
    code, out, _ = run(GGUF, "--fleet", "8xrtx4090-24g", "--ep", "--precision", "stored")
    assert code == 1
    assert (
        "--ep: llama.cpp has no expert parallelism; a mixture of experts' experts are split over "
        "cards by layer with the rest, or kept in RAM (--n-cpu-moe)" in " ".join(out.split())
    )


def test_gguf_cards_past_a_node_without_a_fabric_say_why(run):
    code, out, _ = run(GGUF, "--fleet", "8xrtx4090-24g", "--gpus", "16", "--precision", "stored")
    assert code == 1
    said = " ".join(out.split())
    assert (
        "Tiny-Llama-Q4_K_M.gguf: 16 × rtx4090-24g: 16 cards are more than a rtx4090-24g node's "
        "8, and these nodes have no fabric for llama.cpp's RPC across nodes" in said
    )
    # On two such nodes on a fabric: one server over all sixteen cards, by RPC.
    assert _labels_on(run, "2x8xrtx4090-24g@ib0", "--gpus", "16") == {
        "2 nodes × 8 rtx4090-24g on ib0 (pp16)"
    }


def _labels_on(run, fleet: str, *pins: str) -> set[str]:

    code, out, err = run(GGUF, "--fleet", fleet, *pins, "--json", "--precision", "stored")
    assert code == 0, err
    return {o["label"] for o in json.loads(out)["options"]}


# -- 9. Past the trained context: YaRN where the model's card documents it, else the override ----

# The Qwen3 card's YaRN: factor = context / 32,768 native tokens, rope_theta the config's
# 1,000,000, and max_position_embeddings the context (vLLM 0.33 takes a YaRN config's as scaled).
YARN_128K = (
    '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": '
    '32768, "rope_theta": 1000000}, "max_position_embeddings": 131072}'
)


def test_qwen3_at_128k_is_served_with_yarn_not_the_override(run):
    code, out, err = run(
        "Qwen/Qwen3-8B",
        "--vllm-version",
        "0.33",
        "--fleet",
        "1xh100-80g",
        "--context",
        "128k",
        "--precision",
        "stored",
    )
    assert code == 0, err
    assert out.rstrip().splitlines()[-1] == (
        "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1 --max-model-len 131072 "
        f"--gpu-memory-utilization 0.90 --hf-overrides '{YARN_128K}'"
    )
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in out
    assert (
        "note: a context of 131,072 is past the 40,960 the model was trained for: the commands "
        "stretch it with YaRN (factor 4.0 over 32,768 tokens), as the Qwen3 model card documents "
        "up to 131,072; the card notes that static YaRN may cost some quality on short texts"
        in " ".join(out.split())
    )


def test_sglang_gets_its_own_override_flag(run):
    code, out, err = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--context", "128k", "--precision", "stored",
        "--engine", "sglang", "--commands",
    )  # fmt: skip
    assert code == 0, err
    launch, measure = out.strip().splitlines()
    assert measure.startswith("# measure it: python -m sglang.bench_serving ")
    assert launch == (
        "sglang serve --model-path Qwen/Qwen3-8B --tp-size 1 --context-length 131072 "
        f"--mem-fraction-static 0.830 --json-model-override-args '{YARN_128K}' "
        "--host 0.0.0.0 --port 30000"
    )


def test_the_yarn_factor_is_the_context_over_the_native_length_rounded_up_to_a_tenth(run):
    import shlex

    # 65,536 / 32,768 = 2.0; 100,000 / 32,768 = 3.05…, so 3.1 (3.1 × 32,768 = 101,580 ≥ 100,000).
    for context, factor in (("64k", 2.0), ("100000", 3.1)):
        code, out, _ = run(
            "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--context", context, "--precision",
            "stored", "--commands",
        )  # fmt: skip
        assert code == 0
        argv = shlex.split(out.strip())
        overrides = json.loads(argv[argv.index("--hf-overrides") + 1])
        assert overrides["rope_scaling"]["factor"] == factor
        assert overrides["max_position_embeddings"] == int(argv[argv.index("--max-model-len") + 1])


def test_past_what_the_card_vouches_for_or_without_a_way_it_is_the_override_and_the_warning(run):
    # 262,144 is past the 131,072 the Qwen3 card validates YaRN for.
    code, out, _ = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh200-141g", "--context", "256k", "--precision", "stored",
        "--commands",
    )  # fmt: skip
    assert code == 0
    assert out.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen3-8B ")
    assert "--hf-overrides" not in out
    # Llama 3.1's card documents no way past its 131,072.
    code, out, _ = run(
        "meta-llama/Llama-3.1-8B-Instruct", "--fleet", "1xh200-141g", "--context", "256k",
        "--precision", "stored",
    )  # fmt: skip
    assert code == 0
    assert out.rstrip().splitlines()[-1].startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve")
    assert (
        "the commands set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, without which the engine refuses it; "
        "answers past it may degrade" in " ".join(out.split())
    )


def test_which_configs_the_qwen3_card_covers():
    from pathlib import Path

    from llmfit.plan.model import Yarn
    from llmfit.sources.config import model_from_config
    from tests.conftest import HUB

    path = next((HUB / "models--Qwen--Qwen3-8B" / "snapshots").glob("*/config.json"))
    cfg = json.loads(path.read_text())
    assert model_from_config(cfg, Path("c.json")).yarn == Yarn(
        32_768, 131_072, 1_000_000.0, "the Qwen3 model card"
    )
    # Qwen3-0.6B and -1.7B (hidden 1,024 and 2,048): their cards give 32,768 only.
    assert model_from_config({**cfg, "hidden_size": 2048}, Path("c.json")).yarn is None
    # A config that scales its rope already, or a 2507 release's 262,144 native context.
    scaled = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert model_from_config({**cfg, "rope_scaling": scaled}, Path("c.json")).yarn is None
    assert (
        model_from_config({**cfg, "max_position_embeddings": 262144}, Path("c.json")).yarn is None
    )
    # Another family: no documented way.
    assert model_from_config({**cfg, "model_type": "llama"}, Path("c.json")).yarn is None


def test_the_models_table_says_which_columns_it_left_out(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = run("models", "--fleet", str(EXAMPLE_FLEET))
    assert code == 0
    # The table's header is the line that starts with its "#" column: the line above it names
    # the cache and fleet by their paths, which wraps at 120 columns in a longer checkout.
    header = next(line for line in out.splitlines() if line.lstrip().startswith("# ")).split()
    assert "params" not in header and "now" not in header
    # Every best option on the example fleet is free now and meets the chat workload: those
    # columns are named with their value. The output a card, which the listing ranks by, stays.
    assert header[-1] == "tok/s/GPU"
    assert (
        "not shown at 120 columns: bits, now (all free), meets (yes for all), params, seqs, max ctx"
    ) in out.splitlines()


def test_a_card_count_that_is_no_power_of_two_is_planned_as_ranks(run):
    # 6 cards: 32 heads do not divide by 6 (refused), but 3 ranks of 2 and 6 of 1 do.
    code, out, _ = run(
        "Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--gpus", "6", "--precision", "stored",
        "--all", "--json",
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert {o["label"] for o in doc["options"]} == {
        "6 × h100-80g (tp2×dp3)", "6 × h100-80g (dp6)",
    }  # fmt: skip
    assert any(
        r["where"] == "6 × h100-80g (tp6)"
        and r["reason"].startswith(
            "Total number of attention heads (32) must be divisible by tensor parallel size (6)"
        )
        for r in doc["rejected"]
    )
