"""Desktop defaults (issue 34 item 6): a fleet of consumer cards with no --context plans at a
stated desktop default (16k) with how to change it, not the trained context; a layout with every
layer on the card says so; the table says what a CPU row's `-` and an unknown card's `?` mean,
and at which context `tok/s` is."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLE_FLEET


def test_a_consumer_card_plans_at_the_desktop_default_and_says_how_to_change_it(run):
    code, out, err = run("meta-llama/Llama-3.1-8B-Instruct", "--fleet", "1xrtx4090-24g", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["context"] == 16_384
    assert (
        "context 16,384 tokens, the desktop default on consumer cards (the model was trained for "
        "131,072): --context trained plans that, or --context N any other"
    ) in doc["notes"]
    # The bf16 checkpoint as shipped fits the card at 16k: no "shorter context" what-if needed.
    assert doc["options"][0]["what_if"] is None
    assert "--max-model-len 16384" in doc["options"][0]["commands"][0]["argv"] or (
        "16384" in doc["options"][0]["commands"][0]["argv"]
    )


def test_trained_plans_the_trained_context_on_a_desktop(run):
    code, out, err = run("meta-llama/Llama-3.1-8B-Instruct", "--fleet", "1xrtx4090-24g",
                         "--context", "trained", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["context"] == 131_072


def test_a_data_centre_fleet_plans_the_trained_context(run):
    code, out, err = run("meta-llama/Llama-3.1-8B-Instruct", "--fleet", str(EXAMPLE_FLEET),
                         "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["context"] == 131_072


def test_the_table_says_what_tok_s_is_and_what_a_cpu_rows_dash_means(run):
    code, out, err = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", "1xrtx4090-24g,cpu:64g",
                         "--precision", "stored")  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    # The Tiny-Llama was trained for 8,192 tokens: shorter than the desktop's 16k, so its own.
    assert "tok/s: one sequence's decode at 8,192 tokens of context" in lines
    assert "-: a CPU row has no GPU, and its serving under load is not modelled" in lines
    cpu_rows = [line.split() for line in lines if " CPU " in line and line[:2].strip().isdigit()]
    # tok/s/GPU and meets, then hosts and now.
    assert cpu_rows and all(row[-4:-2] == ["-", "-"] for row in cpu_rows)


def test_every_layer_on_the_card_is_said_so():
    from llmfit.plan.engines.llamacpp_launch import in_ram

    # An artifact of 32 layers with all 32 on the card (the output layer in RAM): not "+ 0 of
    # 32 layers in RAM".
    class Launch:
        cpu_moe_layers = 0
        gpu_layers = 32

    class Opt:
        launch = Launch()

        class artifact:  # noqa: N801
            class layout:  # noqa: N801
                layers = 32

    assert in_ram(Opt()) == ", all 32 layers on the card"  # type: ignore[arg-type]
    Opt.launch.gpu_layers = 19
    assert in_ram(Opt()) == " + 13 of 32 layers in RAM"  # type: ignore[arg-type]
