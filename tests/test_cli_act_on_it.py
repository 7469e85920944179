"""Issue 27, "a plan you can act on without a second look": each item's command, run as the issue
ran it, and the corrected output it now prints."""

from __future__ import annotations

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
    assert err == (
        "llmfit: --gpu-memory-utilization 0.7 is vLLM's share of a card, and SGLang's is its own "
        "--mem-fraction-static (the weights and the KV pool, without the activations and CUDA "
        "graphs SGLang keeps beside them): give --mem-fraction-static for SGLang.\n"
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
