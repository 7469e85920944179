"""Hostile fleets (issue 12): counts past any fleet, numbers that are not finite or not in range,
names that would reach the terminal or a command as something else, empty and over-long
arguments. Each is one sentence naming the file, the line and the key, or the argument."""

from __future__ import annotations

import pytest

from llmfit.errors import FleetFileError, UsageError
from llmfit.sources.fleet import INLINE_GRAMMAR, load_fleet, parse_fleet, resolve_fleet

RULE = "letters, digits, '.', '-' and '_', at most 128"


def test_a_pool_of_10_to_the_12_nodes_is_one_entry():
    text = '[[pool]]\nname = "h100"\ncount = 1_000_000_000_000\ngpu = "h100-80g"\ngpus = 8\n'
    (pool,) = parse_fleet(text, "f.toml").nodes
    assert (pool.id, pool.count, pool.node_id(10**12 - 1)) == ("h100", 10**12, "h100-1000000000000")
    (inline,) = load_fleet("99999999999x8xh100-80g").nodes
    assert (inline.count, inline.node_ids(2)) == (99_999_999_999, ("h100-80g-1", "h100-80g-2"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[pool]]\nname = "h100"\ncount = 1_000_000_000_001\ngpu = "h100-80g"\n',
         "f.toml:3: pool[0].count is 1,000,000,000,001; a pool holds at most "
         "1,000,000,000,000 nodes."),
        ("[[node]]\nram_gb = inf\n",
         "f.toml:2: node[0].ram_gb is inf; it must be a finite number of GB."),
        ("[[node]]\nram_gb = nan\n",
         "f.toml:2: node[0].ram_gb is nan; it must be a finite number of GB."),
        ("[[node]]\nram_gb = -inf\n",
         "f.toml:2: node[0].ram_gb is -inf; it must be a finite number of GB."),
        ("[[node]]\nram_gb = 1e300\n",
         "f.toml:2: node[0].ram_gb is 1e+300; it must be at most 1,048,576 GB."),
        ("[[node]]\nram_gb = 2_000_000\n",
         "f.toml:2: node[0].ram_gb is 2000000; it must be at most 1,048,576 GB."),
        ("[[node]]\nram_gb = 100\nfree_ram_gb = nan\n",
         "f.toml:3: node[0].free_ram_gb is nan; it must be a finite number of GB."),
        ('[[node]]\ngpu = "h100"\ngpu_memory_gb = inf\n',
         "f.toml:3: node[0].gpu_memory_gb is inf; it must be a finite number of GB."),
        ('[[node]]\ngpu = "h100"\ngpu_memory_gb = 1e9\n',
         "f.toml:3: node[0].gpu_memory_gb is 1000000000.0; it must be at most 65,536 GB."),
        ('[[node]]\ngpu = "h100-80g"\ngpus = 2000\n',
         "f.toml:3: node[0].gpus is 2,000; a node holds at most 1,024 cards of a class."),
        ('[[node]]\ngpu = "h100-80g"\ngpus = 8\nunhealthy_gpus = 1025\n',
         "f.toml:4: node[0].unhealthy_gpus is 1,025; a node holds at most 1,024 cards of a class."),
        ('[[node]]\ngpu = "x-99999g"\n',
         "f.toml:2: node[0].gpu is 'x-99999g', whose label says more than 65,536 GB a card."),
        ("[[node]]\nram_gb = " + "9" * 5000 + "\n",
         "f.toml is not valid TOML: it holds a number too long to read."),
        ("a = " + "[" * 100_000 + "]" * 100_000 + "\n",
         "f.toml is not valid TOML: it nests arrays too deep."),
        # Names reach the terminal and the commands: control characters, newlines that would
        # forge a line, rich markup, spaces and quotes are refused, and shown escaped.
        ('[[node]]\nname = "a\\u001b[31mb"\n',
         f"f.toml:2: node[0].name is 'a\\x1b[31mb', not a host name ({RULE})."),
        ('[[node]]\nname = "a\\nllmfit: forged"\n',
         f"f.toml:2: node[0].name is 'a\\nllmfit: forged', not a host name ({RULE})."),
        ('[[node]]\nname = "[bold]x[/bold]"\n',
         f"f.toml:2: node[0].name is '[bold]x[/bold]', not a host name ({RULE})."),
        ('[[node]]\nname = "gpu box; rm -rf ~"\n',
         f"f.toml:2: node[0].name is 'gpu box; rm -rf ~', not a host name ({RULE})."),
        ('[[node]]\nname = ""\n', f"f.toml:2: node[0].name is '', not a host name ({RULE})."),
        ('[[pool]]\nname = "a\\tb"\ncount = 2\n',
         f"f.toml:2: pool[0].name is 'a\\tb', not a host name ({RULE})."),
        ('[[node]]\nfabric = "ib\\u001b"\n',
         f"f.toml:2: node[0].fabric is 'ib\\x1b', not a fabric name ({RULE})."),
        ('[[node]]\ngpu = "h100-80g\\u0007"\n',
         "f.toml:2: node[0].gpu is 'h100-80g\\x07', not a GPU class (letters, digits, '.', '-' "
         "and '_', like h100-80g)."),
        ('[[node]]\ngpu = "[red]h100-80g"\n',
         "f.toml:2: node[0].gpu is '[red]h100-80g', not a GPU class (letters, digits, '.', '-' "
         "and '_', like h100-80g)."),
        # Pools are ranges of names: a clash is found without naming each node.
        ('[[pool]]\nname = "h"\ncount = 3\n[[pool]]\nname = "h"\ncount = 2\n',
         "f.toml:5: pool[1].name is 'h-1', a name another node already has; names must be unique."),
        ('[[pool]]\nname = "h"\n[[pool]]\nname = "h"\ncount = 5\n',
         "f.toml:4: pool[1].name is 'h-1', a name another node already has; names must be unique."),
        ('[[pool]]\nname = "a"\ncount = 1_000_000_000_000\n[[node]]\nname = "a-999999999999"\n',
         "f.toml:5: node[0].name is 'a-999999999999', a name another node already has; names "
         "must be unique."),
    ],
)  # fmt: skip
def test_each_hostile_value_is_one_sentence(text, message):
    with pytest.raises(FleetFileError) as e:
        parse_fleet(text, "f.toml")
    assert e.value.message == message
    assert e.value.exit_code == 3


def test_names_that_only_look_alike_do_not_clash():
    # A pool of one named h-3 is h-3-1, which pool h (h-1 … h-7) does not have.
    text = '[[pool]]\nname = "h"\ncount = 7\n[[pool]]\nname = "h-3"\n[[node]]\nname = "h-08"\n'
    assert parse_fleet(text, "f.toml").node_ids()[-2:] == ("h-3-1", "h-08")
    # A pool of no nodes names none.
    text = '[[pool]]\nname = "h"\ncount = 0\n[[node]]\nname = "h-1"\n'
    assert parse_fleet(text, "f.toml").node_ids() == ("h-1",)


@pytest.mark.parametrize(
    ("arg", "why"),
    [
        ("1000000000001x8xh100-80g", "has more than 1,000,000,000,000 nodes"),
        ("2000xh100-80g", "has more than 1,024 cards a node"),
        ("cpu:2000000t", "has more than 1,048,576 GB of RAM a node"),
        ("8xx-99999g", "names a card of more than 65,536 GB"),
        ("9" * 300 + "x8xh100-80g", "has more than 1,000,000,000,000 nodes"),
        ("a\x00b", "is not a fleet"),
    ],
)
def test_each_hostile_inline_fleet_is_one_sentence(arg, why):
    with pytest.raises(UsageError) as e:
        load_fleet(arg)
    part = arg.strip().lower()
    assert e.value.message == f"--fleet {arg!r}: {part!r} {why}; write {INLINE_GRAMMAR}."
    assert e.value.exit_code == 2


def test_an_inline_fleet_over_255_characters_is_read():
    """Longer than a file name may be: looking it up as a file fails (ENAMETOOLONG), and it is
    read as the inline fleet it is."""
    arg = ",".join(f"2x8xh100-80g@ib{i}" for i in range(20))
    assert len(arg) > 255
    assert load_fleet(arg).node_count == 40


def test_a_path_over_255_characters_is_no_such_file():
    arg = "/tmp/" + "x" * 300 + ".toml"
    with pytest.raises(FleetFileError) as e:
        load_fleet(arg)
    assert e.value.message == f"{arg}: no such fleet file."


@pytest.mark.parametrize("arg", ["", "   "])
def test_an_empty_fleet_is_not_this_machine(arg):
    with pytest.raises(UsageError) as e:
        resolve_fleet(arg, machine=lambda: pytest.fail("planned this machine"))
    assert e.value.message == (
        f"--fleet {arg!r} is empty; give a fleet file or an inline fleet like 8xh100-80g."
    )
    assert e.value.exit_code == 2


def test_the_cli_says_each_in_one_sentence(run, tmp_path):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "")
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: --fleet '' is empty; give a fleet file or an inline fleet like 8xh100-80g.\n"
    )
    code, _, err = run("fleet", "")
    assert (code, err) == (2, "llmfit: --fleet '' is empty; give a fleet file or an inline "
                              "fleet like 8xh100-80g.\n")  # fmt: skip
    bad = tmp_path / "f.toml"
    bad.write_text("[[node]]\nram_gb = inf\n")
    code, _, err = run("fleet", str(bad))
    assert (code, err) == (3, f"llmfit: {bad}:2: node[0].ram_gb is inf; it must be a finite "
                              "number of GB.\n")  # fmt: skip
    code, out, _ = run("fleet", "99999999999x8xh100-80g@ib0", "--json")
    assert code == 0 and '"nodes": 99999999999' in out
