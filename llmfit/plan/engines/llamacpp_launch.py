"""llama.cpp's launch: what a llama-server line of an option is made of, the lines that start
it (one server, independent servers side by side, or a head and its RPC workers across nodes),
where it runs in words, and its container images."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.engines import Image, knobs
from llmfit.plan.engines.llamacpp_options import LlamaCppOptions
from llmfit.plan.launch import Command, Given
from llmfit.plan.options import Option

RPC_PORT = 50052  # rpc-server's default port (tools/rpc/README.md)
PORT = 8080  # llama-server's default; each further server on a node takes the next one
# llama.cpp's server images (docs/docker.md, .devops/cuda.Dockerfile and cpu.Dockerfile, target
# `server`): ENTRYPOINT /app/llama-server, a HEALTHCHECK on :8080/health. They hold llama-server
# only, built without GGML_RPC, so the RPC launch across nodes has no image. llmfit does not model
# llama.cpp releases, so the floating tags are named.
IMAGE_CUDA = "ghcr.io/ggml-org/llama.cpp:server-cuda"
IMAGE_CPU = "ghcr.io/ggml-org/llama.cpp:server"


@dataclass(frozen=True)
class LlamaCppLaunch:
    """What a llama-server line of an option is made of, beside its layout."""

    ctx_size: int
    # --n-gpu-layers (n_layer + 1 is every layer and the output layer), 0 on a CPU.
    gpu_layers: int
    # The equal --tensor-split across a server's cards (empty on one card).
    tensor_split: tuple[int, ...] = ()
    cpu_moe_layers: int = 0
    # --cache-type-k/-v: "f16" (the default) or "q8_0".
    cache_type: str = "f16"
    # The file on this machine to pass as -m, where a local path was asked for (--local-paths,
    # or a repository that is a local directory); None: -hf REPO:QUANT, which works on any node.
    model_path: str | None = None
    # The knobs the user set (llamacpp_options.py); those not printed from the placement are
    # passed on as given.
    options: LlamaCppOptions = LlamaCppOptions()
    # A command being checked, which the launch runs as given (llmfit check).
    given: Given | None = None
    # How many cards one server may see, where its node may have more: llama-server spreads the
    # layers over every card it sees, so a server planned on k cards of a wider node is shown
    # only its own (CUDA_VISIBLE_DEVICES); 0 where it takes every card of its node.
    visible: int = 0


# The variable that shows a process only some of a node's cards (CUDA's; ROCm's HIP runtime
# honours it too).
_VISIBLE = "CUDA_VISIBLE_DEVICES"


def _cards(first: int, count: int) -> str:
    """ "0,1": the indices of `count` cards from `first`."""
    return ",".join(str(c) for c in range(first, first + count))


def in_ram(o: Option[LlamaCppLaunch]) -> str:
    """What an option keeps in the host's RAM: " + experts of 19 layers in RAM"."""
    launch = o.launch
    layout = o.artifact.layout
    if launch.cpu_moe_layers:
        return f" + experts of {launch.cpu_moe_layers} layers in RAM"
    if layout and launch.gpu_layers == layout.layers:
        # Every repeating layer on the card, only the output layer in RAM: "+ 0 of 32 layers in
        # RAM" read as if none were on the card (issue 34).
        return f", all {layout.layers} layers on the card"
    if layout and 0 < launch.gpu_layers < layout.layers:
        return f" + {layout.layers - launch.gpu_layers} of {layout.layers} layers in RAM"
    return ""


def where(o: Option[LlamaCppLaunch]) -> str:
    """Where it runs, in the grammar of every label (Layout.short): llama.cpp's layer split over
    k cards is its pipeline ("pp4"; llama.cpp logs "pipeline parallelism enabled"), its
    independent servers data-parallel copies ("dp4"), then what stays in the host's RAM."""
    if o.cpu:
        return "CPU"
    lay = o.layout
    if lay.nodes > 1:
        return f"{lay.nodes} nodes × {lay.cards_per_node} {o.gpu_class} on {o.fabric}{lay.label()}"
    return f"{lay.cards} × {o.gpu_class}{lay.label()}{in_ram(o)}"


def commands(
    option: Option[LlamaCppLaunch],
    repo_id: str,
    revision: str | None,
    *,
    ray: bool = False,
) -> list[Command]:
    o = option
    launch = o.launch
    art = o.artifact
    argv = ["llama-server"]
    if launch.model_path:
        # The first part of a split file: llama.cpp opens the others from its directory.
        argv += ["-m", launch.model_path]
        if art.projector:
            argv += ["--mmproj", art.projector]
    else:
        # By its tag, llama.cpp fetches the quant (every part, and the mmproj) into its own
        # cache on the node that runs it: a path of this machine's cache means nothing there.
        argv += ["-hf", f"{repo_id}:{art.quant}" if art.quant else repo_id]
    # Every value the plan relied on is explicit, so that llama.cpp's --fit (on by default)
    # and its defaults (ctx 0 = the trained context, -ngl auto) cannot change the plan.
    argv += ["--ctx-size", str(launch.ctx_size), "--n-gpu-layers", str(launch.gpu_layers)]
    if launch.tensor_split:
        argv += ["--tensor-split", ",".join(map(str, launch.tensor_split))]
    if launch.cpu_moe_layers:
        argv += ["--n-cpu-moe", str(launch.cpu_moe_layers)]
    lay = o.layout
    workers = o.node_ids[1:] if lay.nodes > 1 else ()
    if lay.nodes > 1:
        hosts = workers or tuple(f"<worker-{i}>" for i in range(1, lay.nodes))
        argv += ["--rpc", ",".join(f"{h}:{RPC_PORT}" for h in hosts)]
    argv += o.engine_flags
    argv += knobs.argv(launch.options)
    argv += ["--flash-attn", "on", "--host", "0.0.0.0"]
    if lay.replicas > 1:
        # One server a set of cards, each seeing only its own and listening on its own port.
        per = lay.pp
        return [
            Command(
                "replica",
                (*argv, "--port", str(PORT + i)),
                env=((_VISIBLE, _cards(i * per, per)),),
            )
            for i in range(lay.replicas)
        ]
    argv += ["--port", str(PORT)]
    env: tuple[tuple[str, str], ...] = (
        ((_VISIBLE, _cards(0, launch.visible)),) if launch.visible else ()
    )
    secrets: tuple[tuple[int, str], ...] = ()
    if launch.given is not None:
        # A checked command is launched as the user wrote it (its -ngl, its --rpc hosts).
        argv, env, secrets = list(launch.given.argv), launch.given.env, launch.given.secrets
    if lay.nodes <= 1:
        return [Command("all", tuple(argv), env=env, secrets=secrets)]
    # The workers first: the head connects to them as it starts.
    rpc = ("rpc-server", "-H", "0.0.0.0", "-p", str(RPC_PORT))
    out = [Command("worker", rpc, h) for h in workers]
    out.append(Command("head", tuple(argv), o.node_ids[0] if o.node_ids else None, env, secrets))
    return out


def image(option: Option[LlamaCppLaunch]) -> Image:
    return Image(
        name=IMAGE_CPU if option.cpu else IMAGE_CUDA,
        entrypoint=("llama-server",),
        port=PORT,
        health="/health",
        # -hf: common.cpp fs_get_cache_directory(), $LLAMA_CACHE else ~/.cache/llama.cpp.
        download_cache="LLAMA_CACHE",
        download_dir=".cache/llama.cpp",
    )
