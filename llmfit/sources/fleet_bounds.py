"""The bounds on what a fleet states, and the names it may give, shared by every reader of a
fleet (the fleet file and inline fleets, sources/fleet.py; this machine, sources/machine.py; the
imports, sources/fleet_import.py): kept apart so that none of them imports another for its rules.
"""

from __future__ import annotations

import re

# Bounds on every number a fleet states (issue 12). Past them a value is a typo or an attack, and
# each is one sentence rather than a plan that never ends or an overflow. A pool is kept as a count
# (one PoolNode, whatever its size), so even 10^12 nodes cost nothing to plan; past that no fleet
# exists. 1,024 cards of a class on a node is far past any machine (an 8-card node cut into MIG
# instances has 56), and bounds the planner's loops over a node's cards; a petabyte of RAM and
# 64 TB of card memory are past any node and any card.
MAX_NODES = 10**12
MAX_CARDS = 1024
MAX_RAM_GB = 1 << 20
MAX_CARD_GB = 1 << 16
# Names reach the terminal and the commands (a node's name is the host an engine is told to reach),
# so they are host names, and GPU classes are labels: no control character, newline, space, quote
# or markup can be in either.
MAX_NAME = 128
# Cards of one class with figures of their own (memory_bandwidth_gbs, bf16_tflops, …) are planned
# apart, one class of cards each set of figures: a fleet of 1,000 nodes each with its own
# bandwidth took 2 minutes and 746 MB (issue 33). Past this many different sets in one fleet it
# is refused in one sentence (docs/fleet.md); at it, a plan takes a few seconds.
MAX_CARD_FIGURES = 32
# Kubernetes label syntax (k8s.io/apimachinery validation): an optional DNS prefix and a name of
# at most 63 characters; a value of at most 63, possibly empty.
_LABEL_KEY = re.compile(
    r"(?:[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_CLASS = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_PRODUCT = re.compile(r"[a-z0-9][a-z0-9 _.()-]{0,127}")  # "nvidia h100 80gb hbm3"
NAME_RULE = f"letters, digits, '.', '-' and '_', at most {MAX_NAME}"


def is_name(text: str) -> bool:
    """A node, pool or fabric name llmfit accepts: a host name's characters, at most MAX_NAME."""
    return len(text) <= MAX_NAME and _NAME.fullmatch(text) is not None


def is_gpu_class(text: str) -> bool:
    return len(text) <= MAX_NAME and _CLASS.fullmatch(text) is not None
