"""The engines llmfit plans for, behind one protocol, and the registry the planner iterates.

An engine says which artifacts it runs, sizes the layouts it accepts on a fleet's cards (what each
card holds, what it refuses and why), and spells the launch of an option it planned: its command
lines, the parts of a card in words, and the flags it reads back from a command a user already
has (`llmfit check`). A new engine is a module that implements `Engine` and one line in
`_REGISTRY`; the planner and the renderers find it here by its key and name none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from llmfit.plan.credentials import SHELL_NAME

if TYPE_CHECKING:
    # Named in annotations only: the CLI reads the registry's keys to build its options, and
    # `llmfit --help`, `--version` and `llmfit fleet` need none of the plan's nouns.
    from llmfit.plan.artifact import Artifact
    from llmfit.plan.credentials import Vault
    from llmfit.plan.fleet import Fleet
    from llmfit.plan.launch import Command
    from llmfit.plan.layout import LayoutSpace
    from llmfit.plan.model import AttentionCharge, Model, Shape
    from llmfit.plan.options import Option, Rejection
    from llmfit.plan.pools import ClassPool
    from llmfit.plan.settings import PlanSettings


# No environment set in front of a command.
NO_ENV: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Job:
    """One artifact to place, with everything an engine needs to size its layouts."""

    artifact: Artifact
    model: Model
    # The shape at the KV dtype asked for (`--kv-cache-dtype`, else the checkpoint's).
    shape: Shape
    fleet: Fleet
    pools: Sequence[ClassPool]
    context: int
    settings: PlanSettings


@dataclass
class Found:
    """What an engine found for a job: the options, and the ways it refused (or did not show)."""

    options: list[Option[Any]] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    # What the user should know about the whole plan, in one sentence each.
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Part:
    """One part of a card, in words: its name, its bytes, and how they were worked out."""

    name: str
    bytes: int
    why: str


@dataclass(frozen=True)
class Assumed:
    """A setting an option's numbers rest on, as data: the engine's flag that sets it, its value
    as the flag takes it, and where the value came from (render words it)."""

    flag: str
    value: str
    # "given": the user's (llmfit's flag, or the command checked); "default": the engine's own
    # default, which the plan follows; "checkpoint": what the model's files ask for; "what-if":
    # the what-if's flag; "plan": what llmfit chose for this option (the context, a placement).
    source: str


# The sources an `Assumed` may name, in the order they are told apart.
SOURCES = ("given", "default", "checkpoint", "what-if", "plan")


@dataclass(frozen=True)
class Explanation:
    """An option's fullest card as the engine explains it: its parts (those of `PerCard` the
    engine has, which add up to the card's `need`), what else it holds beside the card, and what
    the numbers rest on."""

    parts: tuple[Part, ...]
    # What the engine is assumed to do that the numbers rest on.
    assumes: str
    # What the option holds elsewhere than its cards (the host's part of a model kept partly in
    # RAM): said beside the card's parts, not counted in its need.
    beside: tuple[Part, ...] = ()
    # The KV heads a card holds where the engine splits them over its cards (vLLM's rule: up to
    # their number, one a rank past it); None where each card holds every head of its layers.
    kv_heads: int | None = None
    # The settings the numbers rest on, each with where its value came from.
    settings: tuple[Assumed, ...] = ()


@dataclass(frozen=True)
class Request:
    """A command line an engine was given (`llmfit check -- …`), read into what a plan needs: the
    repository and file it names, the settings and the exact layout it asks for."""

    repo: str
    settings: PlanSettings
    # A GGUF quant the command names (`-hf REPO:Q4_K_M`), or a local file (`-m path`).
    quant: str | None = None
    path: str | None = None
    # Flags read but not modelled: they change nothing in the plan.
    ignored: tuple[str, ...] = ()
    # The command as it is to be launched and shown: the words given, with each credential's
    # value (`--api-key`, `--hf-token`) in place as "$VARIABLE", and where (index, variable).
    argv: tuple[str, ...] = ()
    secrets: tuple[tuple[int, str], ...] = ()
    # Whether the command puts some of the model on the node's cards (llama-server -ngl N, N > 0):
    # a way of running it on the CPU alone is then not the command, and does not answer it.
    on_cards: bool = True


@dataclass(frozen=True)
class Image:
    """The engine's official container image, and what `--format docker|k8s` needs to run an
    option's commands in it (render/deploy.py reads only this, and names no engine).

    An engine that has no image for some launch says so through `programs`: a command whose
    program is neither the entrypoint's nor one of `programs` is refused with a sentence naming
    it (llama.cpp's rpc-server is in none of llama.cpp's images).
    """

    # Name and tag, the tag following the engine version the plan models ("vllm/vllm-openai:
    # v0.33.0"; an engine whose version the plan does not model names its floating tag).
    name: str
    # The leading words of the engine's serve command that the image's ENTRYPOINT already runs
    # ("vllm", "serve"): a container is given the rest of the command, unchanged. Empty for an
    # image with no ENTRYPOINT: its server's command is given whole, and its program is the first
    # of `programs`.
    entrypoint: tuple[str, ...]
    # The port the server listens on when its command names none, the flag that names one, and
    # the path that answers 200 once the model is loaded (the readiness probe).
    port: int
    health: str
    port_flag: str = "--port"
    # Other programs of the engine's commands that the image has on its PATH ("ray").
    programs: tuple[str, ...] = ()
    # Whether the engine's processes on a node share memory through /dev/shm (PyTorch's workers),
    # so that a container needs the host's IPC namespace (`--ipc=host`) or a large /dev/shm.
    shared_memory: bool = False
    # Flags that keep a program of `programs` in the foreground, for a container whose only
    # process it is (("ray", "--block"): `ray start` otherwise returns once its daemons are up).
    foreground: tuple[tuple[str, str], ...] = ()
    # A shell test that is true once a multi-node launch's workers have joined the head (`{nodes}`
    # stands for how many nodes); a pod that runs the head's commands one after the other waits
    # for it before the last. Empty where the engine waits by itself.
    joined: str = ""
    # Where the image's user keeps the Hugging Face cache, which a container mounts.
    hf_home: str = "/root/.cache/huggingface"
    # The variable naming where the engine keeps what it downloads by itself, when that is not
    # the Hugging Face cache (llama-server -hf: LLAMA_CACHE, ~/.cache/llama.cpp): a container
    # mounts a cache there too, or every start downloads the model again. `download_dir` is that
    # cache's folder under a user's home ("~/.cache/llama.cpp" is ".cache/llama.cpp"); the
    # image's user's home is /root.
    download_cache: str = ""
    download_dir: str = ""


class Engine(Protocol):
    """What the planner and the renderers need of an engine.

    A new engine implements every method here, `image` included: `--format docker|k8s` is asked
    of every engine's options.
    """

    # The registry key, as JSON and `--engine` spell it ("vllm", "llama.cpp").
    key: str
    # The engine's own name, for sentences ("vLLM").
    name: str
    # The program a `check` command line starts with ("vllm", "llama-server").
    programs: tuple[str, ...]
    # The layout dimensions its commands can launch: the planner offers no layout outside it.
    layouts: LayoutSpace
    # What its commands set in their environment to serve a context past the model's trained one,
    # which it refuses otherwise ((name, value) pairs; empty where it needs nothing).
    long_context_env: tuple[tuple[str, str], ...]

    def runs(self, artifact: Artifact) -> bool:
        """Whether it can serve this artifact at all (its format)."""
        ...

    def plan(self, job: Job) -> Found:
        """Every layout it accepts on the job's fleet that fits, and what it refused."""
        ...

    def commands(
        self, option: Option[Any], repo_id: str, revision: str | None, *, ray: bool = False
    ) -> list[Command]:
        """The processes that run the option, role by role."""
        ...

    def attention(self, shape: Shape, context: int) -> tuple[AttentionCharge, ...]:
        """Each kind of layer of the model, what its cache costs one card, and how it was
        charged, in the engine's terms (the plan's summary of the model's attention)."""
        ...

    def explain(self, option: Option[Any], model: Model) -> Explanation:
        """The option's fullest card, part by part, and what the numbers assume."""
        ...

    def image(self, option: Option[Any]) -> Image:
        """The official container image that runs the option's commands (for a CPU option, the
        engine's CPU image), with what a container of it needs: see `Image`."""
        ...

    def where(self, option: Option[Any]) -> str:
        """Where it runs, in a few words: "8 × h200-141g", "2 nodes × 8 h100-80g on ib0"."""
        ...

    def values(self, option: Option[Any]) -> dict[str, object]:
        """This engine's own fields of one of its options, for the JSON document: exactly the
        fields its `_REGISTRY` line names (every engine's are present on every option, null
        where they are not that engine's)."""
        ...

    def read_command(
        self,
        argv: Sequence[str],
        defaults: PlanSettings,
        env: Mapping[str, str] = NO_ENV,
        vault: Vault | None = None,
        load: Callable[[str], Any] | None = None,
    ) -> Request:
        """A command line of this engine read back into a request (raises ValueError with the
        sentence that says what is wrong with it); `env` is what the line sets in front of its
        program (`CUDA_VISIBLE_DEVICES=0,1 llama-server …`); `vault` the variables its credentials
        are launched from (llmfit/plan/credentials.py), those set in front of it already in it;
        `load` reads a file the command names for its engine to read (vLLM's `--config`) into its
        data, or raises ValueError with the sentence that says why it cannot."""
        ...


@dataclass(frozen=True)
class Registered:
    """An engine's registry line: where its module is, where its declared options are, and its
    own JSON fields.

    The options and fields are named here rather than asked of the engine: the CLI builds every
    engine's flags at start-up from the options classes alone (light modules), and a JSON
    document carries every engine's fields on every option; asking the engines would import every
    one (and define its nouns) on each run, the ones the plan never used included."""

    module: str
    # The engine's own name, for sentences and help ("vLLM").
    title: str
    # "module:Class" of the engine's options (plan/engines/knobs.py declarations).
    options: str
    fields: tuple[str, ...] = ()
    # Planned only when named (`--engine KEY`, or a command of its own to check), not by default.
    named_only: bool = False
    # The artifact formats it runs and the programs its commands start, so that an engine that
    # cannot run a repository's files, or read a command, is never imported for it.
    formats: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    # How its command starts, for the sentence that says which commands `llmfit check` reads.
    usage: str = ""
    # What the contract test (tests/test_engine_contract.py) plans it on, on the bundled fixtures:
    # (repository, fleet) pairs it plans, every layout of each checked; and the one its knobs are
    # each tried on, a repository and fleet it fits with any knob set to its example.
    cases: tuple[tuple[str, str], ...] = ()
    knob_case: tuple[str, str] | None = None
    # (knob, repository, fleet) for a knob whose effect only a model of its kind shows (prefix
    # caching on a hybrid, the image limit on a multimodal model): tried there, not on knob_case.
    knob_cases: tuple[tuple[str, str, str], ...] = ()
    # Its own modules, beside those named like its module (`vllm_*` for vllm): the core imports
    # none of them (pyproject.toml's import contract, checked against this registry by a test).
    modules: tuple[str, ...] = ()
    # The flags of llmfit's own that it takes (`--gpu-memory-utilization`, `--ray`; `--disagg on`
    # and the pins of plan/engines/honoured.py DISAGG_SETTINGS where its layout space has pair
    # rules): any other given for a plan it runs is refused (plan/engines/honoured.py); its knobs
    # are its own.
    honours: tuple[str, ...] = ()
    # Its own flag for what such a flag sets in other engines, for the refusal to name
    # (("--gpu-memory-utilization", "--mem-fraction-static")).
    instead: tuple[tuple[str, str], ...] = ()
    # Words it is known by beside its key, title, programs and module (its worker's program):
    # the core names none of them in code (tests/test_no_engine_names.py).
    names: tuple[str, ...] = ()


# The safetensors engines' contract cases: a dense model and a MoE on one node, and two models
# that need two and four nodes over a fabric.
_SERVING_CASES = (
    ("Qwen/Qwen3-8B", "8xh100-80g"),
    ("Qwen/Qwen3-30B-A3B", "8xh100-80g"),
    ("deepseek-ai/DeepSeek-V3", "2x8xh100-80g@ib0"),
    ("meta-llama/Meta-Llama-3.1-405B", "4x8xh100-80g@ib0"),
)

# Key → its line; each module has an `ENGINE` implementing Engine. Order is the order engines are
# tried and listed in. SGLang is planned only when named: it runs the same safetensors checkpoints
# as vLLM, on the same layouts, and what its cards hold agrees with vLLM's within a few percent
# (its default static share leaves about what vLLM's utilisation and overhead leave), so planning
# both by default would print every way twice with near-equal numbers; data-parallel attention
# with expert parallelism, SGLang's home ground, vLLM offers too. Named, it is planned beside the
# others, and its own figures are SGLang's (its static share, its pools, its flags).
_REGISTRY: dict[str, Registered] = {
    "vllm": Registered(
        "llmfit.plan.engines.vllm", "vLLM", "llmfit.plan.engines.vllm_options:VllmOptions",
        ("vllm_version",), formats=("safetensors",), programs=("vllm",),
        usage="`vllm serve REPO …`",
        cases=_SERVING_CASES, knob_case=("Qwen/Qwen3-8B", "1xh100-80g"),
        knob_cases=(
            ("enable_prefix_caching", "Qwen/Qwen3-Next-80B-A3B-Thinking", "4xh100-80g"),
            ("speculative_config", "deepseek-ai/DeepSeek-V3", "8xh200-141g"),
            ("limit_mm_per_prompt", "google/gemma-3-27b-it", "1xh100-80g"),
        ),
        modules=("llmfit.plan.engines.serving_speed",),
        honours=(
            "--gpu-memory-utilization", "--kv-cache-dtype", "--ray",
            "--disagg on", "--prefill-tp", "--decode-tp", "--xpyd",
        ),
    ),
    "llama.cpp": Registered(
        "llmfit.plan.engines.llamacpp", "llama.cpp",
        "llmfit.plan.engines.llamacpp_options:LlamaCppOptions",
        ("gpu_layers", "cpu_moe_layers", "host_bytes"), formats=("gguf",),
        programs=("llama-server",),
        usage="`llama-server -m FILE …`/`llama-server -hf REPO:QUANT …`",
        cases=(
            ("llmfit-fixtures/Tiny-Llama-GGUF", "8xrtx4090-24g"),
            ("llmfit-fixtures/Tiny-Llama-GGUF", "cpu:64g"),
        ),
        knob_case=("llmfit-fixtures/Tiny-Llama-GGUF", "1xrtx4090-24g+64g"), names=("rpc-server",),
        # Slots change only a sliding-window layer's cache, and --n-cpu-moe/--cpu-moe only a
        # mixture of experts: tried on real models' headers (fixtures/gguf_repos.py), which the
        # contract test's cache holds beside the bundled one.
        knob_cases=(
            ("tensor_split", "llmfit-fixtures/Tiny-Llama-GGUF", "2xrtx4090-24g"),
            ("parallel", "unsloth/gemma-3-27b-it-GGUF", "1xh100-80g"),
            ("n_cpu_moe", "unsloth/Qwen3-235B-A22B-GGUF", "1xb200-180g+256g"),
            ("cpu_moe", "unsloth/Qwen3-235B-A22B-GGUF", "1xb200-180g+256g"),
        ),
        honours=("--gpu-memory-utilization", "--local-paths"),
    ),
    "sglang": Registered(
        "llmfit.plan.engines.sglang", "SGLang", "llmfit.plan.engines.sglang_options:SglangOptions",
        named_only=True, formats=("safetensors",), programs=("sglang", "sglang.launch_server"),
        usage="`sglang serve --model-path REPO …` (or `python -m sglang.launch_server …`)",
        cases=_SERVING_CASES, knob_case=("Qwen/Qwen3-8B", "1xh100-80g"),
        knob_cases=(("enable_dp_lm_head", "Qwen/Qwen3-30B-A3B", "8xh100-80g"),),
        modules=("llmfit.plan.engines.serving_speed",),
        # Its share of a card is its own static share, of another thing (the weights and the KV
        # pool, with activations and CUDA graphs beside them): neither is mapped to the other.
        honours=(
            "--kv-cache-dtype", "--ray", "--disagg on", "--prefill-tp", "--decode-tp", "--xpyd",
        ),
        instead=(
            ("--gpu-memory-utilization", "--mem-fraction-static"),
            ("--max-num-seqs", "--max-running-requests"),
        ),
    ),
}  # fmt: skip


def keys() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def registered(key: str) -> Registered:
    try:
        return _REGISTRY[key]
    except KeyError:
        raise ValueError(f"unknown engine {key!r}; known: {', '.join(_REGISTRY)}") from None


def engine(key: str) -> Engine:
    """The engine registered under `key` (imported on first use)."""
    found: Engine | None = _engines.get(key)
    if found is None:
        # Kept: a plan asks for its engines a thousand times (each option's words, its fields,
        # its commands), and import_module costs a few µs each even once imported.
        found = _engines[key] = import_module(registered(key).module).ENGINE
    return found


_engines: dict[str, Engine] = {}


def engines() -> list[Engine]:
    return [engine(k) for k in _REGISTRY]


def options_class(key: str) -> type:
    """Engine `key`'s declared options class, without importing the engine."""
    module, _, name = registered(key).options.partition(":")
    cls: type = getattr(import_module(module), name)
    return cls


def may_run(key: str, fmt: str) -> bool:
    """Whether engine `key` runs artifacts of format `fmt`, as its registry line says (without
    importing it; the engine's own `runs` has the last word)."""
    return fmt in registered(key).formats


def planned(key: str, named: Sequence[str]) -> bool:
    """Whether a plan asked for the engines `named` (empty: none named) plans engine `key`."""
    return key in named if named else not registered(key).named_only


def default_keys() -> tuple[str, ...]:
    """The engines planned when none is named."""
    return tuple(k for k, r in _REGISTRY.items() if not r.named_only)


def fields(key: str) -> tuple[str, ...]:
    """Engine `key`'s own JSON fields, without importing it."""
    return registered(key).fields


def field_names() -> tuple[str, ...]:
    """Every engine's own JSON fields, in registry order."""
    out: list[str] = []
    for key in _REGISTRY:
        out += [f for f in fields(key) if f not in out]
    return tuple(out)


def knob_case(key: str, knob: str) -> tuple[str, str] | None:
    """Where engine `key`'s knob is tried: its own case, else the engine's."""
    line = registered(key)
    own = [(repo, fleet) for name, repo, fleet in line.knob_cases if name == knob]
    return own[0] if own else line.knob_case


def register(key: str, line: Registered) -> None:
    """Add an engine to the registry (a plugin's, or a test's double), listed last."""
    if key in _REGISTRY:
        raise ValueError(f"an engine is already registered as {key!r}")
    _REGISTRY[key] = line
    _engines.pop(key, None)


def unregister(key: str) -> None:
    _REGISTRY.pop(key, None)
    _engines.pop(key, None)


def split_env(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """A command line's leading NAME=VALUE words (as a shell sets them for the program that
    follows), and the rest."""
    env: dict[str, str] = {}
    at = 0
    # A shell reads `NAME=value` in front of a command as an assignment only where NAME is a
    # shell name (ASCII letters, digits, underscores); one pass, however many words there are.
    while at < len(argv) and SHELL_NAME.fullmatch(argv[at].partition("=")[0]) and "=" in argv[at]:
        name, _, value = argv[at].partition("=")
        env[name] = value
        at += 1
    return env, list(argv[at:])


def for_argv(argv: Sequence[str]) -> Engine | None:
    """The engine a command line starts (`vllm serve …`, `llama-server …`, or a module run
    with `python -m …`), by its program's name; None when no engine claims it."""
    if not argv:
        return None
    name = argv[0].rsplit("/", 1)[-1]
    if name.startswith("python") and len(argv) > 2 and argv[1] == "-m":
        name = argv[2]
    for key, line in _REGISTRY.items():
        if name in line.programs:
            return engine(key)
    return None


def pair_commands(
    offer: Any, repo_id: str, revision: str | None, apart: bool = False
) -> list[Command]:
    """A disaggregated offer's launch (plan/disagg.py `Offer`), by the engine that planned it:
    each worker's command line, then its router's (plan/engines/disagg_launch.py)."""
    from llmfit.plan.engines.disagg_launch import pair_commands as launch

    return launch(engine(offer.prefill.engine), offer, repo_id, revision, apart)


def router_package(offer: Any) -> str:
    """The pinned PyPI package of a disaggregated offer's router ("vllm-router==0.1.17")."""
    from llmfit.plan.engines.disagg_launch import router_package as package

    return package(engine(offer.prefill.engine))
