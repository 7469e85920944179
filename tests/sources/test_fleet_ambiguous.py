"""A GPU name that is two cards of different memory (issue 26: `8xa100` silently meant the 80 GB
card, and an A100-40GB owner got a plan that runs out of memory) is refused with both named."""

from __future__ import annotations

import pytest

from llmfit.errors import FleetFileError, UsageError
from llmfit.plan import cards
from llmfit.sources.fleet import parse_fleet, parse_inline


def test_a100_alone_is_two_cards_and_a100_with_its_size_is_one():
    assert cards.AMBIGUOUS["a100"] == ("a100-40g", "a100-80g")
    assert cards.resolve("a100") is None
    assert cards.resolve("a100-80g") == "a100-80g"
    assert cards.resolve("A100-SXM4-40GB") == "a100-40g"
    assert cards.resolve("NVIDIA A100-SXM4-80GB") == "a100-80g"


def test_an_inline_fleet_of_a100_names_both_sizes():
    with pytest.raises(UsageError) as e:
        parse_inline("8xa100")
    assert str(e.value).startswith(
        "--fleet '8xa100': '8xa100' names 'a100', whose label does not say its memory (known "
        "classes near it: a100-40g, a100-80g);"
    )
    assert parse_inline("8xa100-40g").nodes[0].kinds[0].gpu_class == "a100-40g"


def test_a_fleet_file_of_gpu_a100_names_both_sizes():
    with pytest.raises(FleetFileError) as e:
        parse_fleet('[[node]]\nname = "x"\ngpu = "a100"\ngpus = 8\n', "fleet.toml")
    assert str(e.value) == (
        "fleet.toml:3: node[0].gpu is 'a100', whose label does not say its memory (write it like "
        "h100-80g or a100-80g-mig-3g.40gb, or give gpu_memory_gb; known classes near it: "
        "a100-40g, a100-80g)."
    )
    # With its memory given, the card is planned by that memory.
    fleet = parse_fleet(
        '[[node]]\nname = "x"\ngpu = "a100"\ngpus = 8\ngpu_memory_gb = 40\n', "fleet.toml"
    )
    assert fleet.nodes[0].kinds[0].card_bytes == 40 * (1 << 30)
