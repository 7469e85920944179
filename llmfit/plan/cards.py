"""The cards llmfit knows: what each GPU class holds, how fast it reads and multiplies, and how it
talks to the cards beside it.

Data, not code paths: one `CardSpec` row per class, each naming its source. The figures are the
makers' own (datasheets and architecture whitepapers, named per row), with these conventions:

- `memory_bytes` is what the driver reports (CUDA's totalGlobalMem, HIP's, Metal's
  recommendedMaxWorkingSetSize), because an engine's share of a card is a share of that, not of
  the number on the box. `memory_kind` says how it was had: "measured" (a tool printed it; the
  sources are in fixtures/fleet/gpu-memory-totals.md), "smi-reserve" (nvidia-smi's framebuffer
  total less the 454 MiB the H100 reserves, where CUDA's own total was not found), "metal" (the
  working set Metal allows one process, measured on Macs of that memory size), "hbm-gib" (AMD's
  Instinct cards are sold at their HBM size in GiB, not GB: the MI300X's "192 GB" is HIP's
  196,592 MiB, 192 GiB less 16 MiB, and an MI355X "288 GB" had 287.18 GiB free as SGLang
  loaded; such a class is its GiB less the same 16 MiB) or "marketed" (0.98 × the decimal GB the
  card is sold as: the lowest ratio of a measured CUDA total to the marketed size among the
  cards measured is the L4's, 23.57 of 24 GB).
- Tensor throughput is DENSE: where a maker states only the figure "with sparsity", half of it.
  `bf16_flops` is the 16-bit rate an engine's bf16 matmuls get (GeForce cards: with FP32
  accumulate, half their FP16-accumulate rate); on cards without bf16 it is their fp16 rate (T4,
  RTX 2080 Ti, RX 7900 XTX) or, without tensor cores, fp32 (P40); `fields_derived` names what a
  row worked out rather than read.
- Links are bytes a second in ONE direction for one GPU: makers quote NVLink and PCIe both ways
  (H100 SXM: "NVLink 900 GB/s", 450 each way; "PCIe Gen5 128 GB/s", 64 each way).
  `link` is the fastest path between two cards of one node as the class is usually sold (PCIe
  cards talk over PCIe; a bridge is a fleet-file override).

None of these figures could be checked against the makers' pages from here (no network): they
are the datasheets' as remembered and cross-checked between sibling rows; a fleet entry
overrides any of them (`override`).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

GIB = 1 << 30
MIB = 1 << 20
G = 1e9  # GB/s
T = 1e12  # TFLOPS


@dataclass(frozen=True)
class CardSpec:
    """One GPU class: memory, bandwidth, dense tensor throughput and links, with its source."""

    key: str  # the class label llmfit prints ("h100-80g")
    name: str  # the product as its maker names it
    vendor: str  # "nvidia" | "amd" | "apple"
    aliases: tuple[str, ...]  # names people type, and nvidia-smi's product names
    memory_bytes: int  # see the module docstring for what each `memory_kind` means
    memory_kind: str  # "measured" | "smi-reserve" | "metal" | "hbm-gib" | "marketed"
    memory_bandwidth: float  # bytes/s
    bf16_flops: float | None  # dense 16-bit tensor FLOP/s (None: not published)
    fp8_flops: float | None  # dense FP8 FLOP/s (None: the card has none)
    int8_ops: float | None  # dense INT8 OP/s
    link: str  # "nvlink3".."nvlink5", "infinity-fabric", "pcie3".."pcie5", "none"
    link_bandwidth: float  # bytes/s one way, card to card within a node (0 when "none")
    pcie_bandwidth: float  # bytes/s one way between the card and its host
    source: str
    fields_derived: tuple[str, ...] = ()
    notes: str = ""
    # Apple silicon: all the machine's memory, of which `memory_bytes` is Metal's share.
    unified_bytes: int | None = None

    @property
    def backend(self) -> str:
        """The engines' compute backend on this card: "cuda", "rocm" or "metal"."""
        return {"nvidia": "cuda", "amd": "rocm", "apple": "metal"}[self.vendor]

    @property
    def link_family(self) -> str:
        """The link's family ("nvlink", "infinity-fabric", "pcie", "none"): what sets a
        collective's latency."""
        return re.sub(r"\d+$", "", self.link)


def _marketed(gb: float) -> int:
    return int(gb * 1e9 * 0.98)


def _hbm_gib(gib: int) -> int:
    return gib * GIB - 16 * MIB


PCIE3, PCIE4, PCIE5 = 16 * G, 32 * G, 64 * G  # x16, one way (makers: 32, 64, 128 GB/s both ways)

H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (2023)"
H200_SHEET = "NVIDIA H200 Tensor Core GPU datasheet (2024)"
A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (2021)"
ADA_PAPER = "NVIDIA Ada Lovelace GPU architecture whitepaper v2.1, appendix A"
GA102_PAPER = "NVIDIA Ampere GA102 GPU architecture whitepaper v2.1, appendix A"
# Where a maker states only "AI TOPS" (Ada: FP8 with sparsity; Blackwell: FP4 with sparsity), the
# dense rates follow the generation's ratios: FP8 and INT8 at half the Ada figure (a quarter of
# Blackwell's), bf16 at half of FP8; GeForce cards halve FP8 and bf16 again with FP32 accumulate,
# as the Ada whitepaper's RTX 4090 column does (660.6 TOPS INT8, 330.3 FP8, 165.2 BF16).
ADA_AI_TOPS = "dense rates from the AI TOPS (FP8 sparse), Ada GeForce ratios"
BLACKWELL_AI_TOPS = "dense rates from the AI TOPS (FP4 sparse), Blackwell ratios"

# fmt: off
CARDS: tuple[CardSpec, ...] = (
    # --- NVIDIA datacenter -----------------------------------------------------------------
    CardSpec(
        "a100-40g", "NVIDIA A100 SXM4 40GB", "nvidia",
        ("a100-40gb", "a100-sxm4-40gb", "A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"),
        42_298_834_944, "measured", 1555 * G, 312 * T, None, 624 * T,
        "nvlink3", 300 * G, PCIE4, A100_SHEET,
        notes="deviceQuery, A100-SXM4-40GB (bottlerocket#3873)",
    ),
    CardSpec(
        "a100-pcie-40g", "NVIDIA A100 PCIe 40GB", "nvidia",
        ("a100-pcie-40gb", "A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB"),
        42_298_834_944, "measured", 1555 * G, 312 * T, None, 624 * T,
        "pcie4", PCIE4, PCIE4, A100_SHEET,
        notes="memory: the SXM4 40GB's CUDA total; GFD gives both 40536 MiB (network-operator#211)",
    ),
    CardSpec(
        "a100-80g", "NVIDIA A100 SXM4 80GB", "nvidia",
        ("a100-80gb", "a100-sxm4-80gb", "a100-sxm-80gb", "A100-SXM4-80GB",
         "NVIDIA A100-SXM4-80GB"),
        85_100_068_864, "measured", 2039 * G, 312 * T, None, 624 * T,
        "nvlink3", 300 * G, PCIE4, A100_SHEET,
        notes="deviceQuery, A100-SXM4-80GB",
    ),
    CardSpec(
        "a100-pcie-80g", "NVIDIA A100 PCIe 80GB", "nvidia",
        ("a100-pcie-80gb", "A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
        85_100_068_864, "measured", 1935 * G, 312 * T, None, 624 * T,
        "pcie4", PCIE4, PCIE4, A100_SHEET,
        notes="memory: the SXM4 80GB's CUDA total (both 81920 MiB in nvidia-smi)",
    ),
    CardSpec(
        "h100-80g", "NVIDIA H100 SXM5 80GB", "nvidia",
        ("h100", "h100-80gb", "h100-sxm", "h100-sxm5", "h100-sxm-80gb", "H100 80GB HBM3",
         "NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        85_045_477_376, "measured", 3350 * G, 989.5 * T, 1979 * T, 1979 * T,
        "nvlink4", 450 * G, PCIE5, H100_SHEET,
        notes="deviceQuery, H100 80GB HBM3; vLLM prints 79.18-79.22 GiB",
    ),
    CardSpec(
        "h800-80g", "NVIDIA H800 SXM5 80GB", "nvidia",
        ("h800", "h800-80gb", "h800-sxm", "NVIDIA H800", "NVIDIA H800 80GB HBM3"),
        85_045_477_376, "measured", 3350 * G, 989.5 * T, 1979 * T, 1979 * T,
        "nvlink4", 200 * G, PCIE5, "NVIDIA H800 Tensor Core GPU datasheet (2023)",
        notes="the H100 SXM's memory and rates, NVLink 400 GB/s both ways (the H100's 900)",
    ),
    CardSpec(
        "h100-pcie-80g", "NVIDIA H100 PCIe 80GB", "nvidia",
        ("h100-pcie", "h100-pcie-80gb", "NVIDIA H100 PCIe"),
        85_045_477_376, "measured", 2000 * G, 756.5 * T, 1513 * T, 1513 * T,
        "pcie5", PCIE5, PCIE5, H100_SHEET,
        notes="memory: the SXM's CUDA total (both 81559 MiB in nvidia-smi)",
    ),
    CardSpec(
        "h100-94g", "NVIDIA H100 NVL", "nvidia",
        ("h100-nvl", "h100nvl", "h100-94gb", "NVIDIA H100 NVL"),
        99_861_594_112, "measured", 3900 * G, 835.5 * T, 1670.5 * T, 1670.5 * T,
        "nvlink4", 300 * G, PCIE5, H100_SHEET,
        notes="deviceQuery, H100 NVL; NVLink 600 GB/s between the bridged pair",
    ),
    CardSpec(
        "h200-141g", "NVIDIA H200 SXM 141GB", "nvidia",
        ("h200", "h200-141gb", "h200-sxm", "NVIDIA H200"),
        (143_771 - 454) * MIB, "smi-reserve", 4800 * G, 989.5 * T, 1979 * T, 1979 * T,
        "nvlink4", 450 * G, PCIE5, H200_SHEET,
        notes="nvidia-smi 143771 MiB (cuda-samples#311) less the H100's 454 MiB reserve",
    ),
    CardSpec(
        "h200-nvl-141g", "NVIDIA H200 NVL", "nvidia",
        ("h200-nvl", "h200nvl", "NVIDIA H200 NVL"),
        (143_771 - 454) * MIB, "smi-reserve", 4800 * G, 835.5 * T, 1670.5 * T, 1670.5 * T,
        "nvlink4", 450 * G, PCIE5, H200_SHEET,
        notes="memory as the H200 SXM's; NVLink 900 GB/s over 2- or 4-way bridges",
    ),
    CardSpec(
        "h20-96g", "NVIDIA H20", "nvidia",
        ("h20", "h20-96gb", "NVIDIA H20"),
        (97_871 - 454) * MIB, "smi-reserve", 4000 * G, 148 * T, 296 * T, 296 * T,
        "nvlink4", 450 * G, PCIE5,
        "NVIDIA H20 specification as server makers publish it (no public NVIDIA datasheet)",
        notes="nvidia-smi 97871 MiB (nvtrust#128) less the H100's 454 MiB reserve",
    ),
    CardSpec(
        "l4-24g", "NVIDIA L4", "nvidia",
        ("l4", "l4-24gb", "NVIDIA L4"),
        23_570_219_008, "measured", 300 * G, 121 * T, 242.5 * T, 242.5 * T,
        "pcie4", PCIE4, PCIE4, "NVIDIA L4 Tensor Core GPU datasheet (2023)",
        notes="deviceQuery, L4",
    ),
    CardSpec(
        "l40s-48g", "NVIDIA L40S", "nvidia",
        ("l40s", "l40s-48gb", "NVIDIA L40S"),
        47_803_596_800, "measured", 864 * G, 362.05 * T, 733 * T, 733 * T,
        "pcie4", PCIE4, PCIE4, "NVIDIA L40S GPU datasheet (2023)",
        notes="deviceQuery, L40S",
    ),
    CardSpec(
        "l40-48g", "NVIDIA L40", "nvidia",
        ("l40", "l40-48gb", "NVIDIA L40"),
        int(44.40 * GIB), "measured", 864 * G, 181.05 * T, 362.05 * T, 362.05 * T,
        "pcie4", PCIE4, PCIE4, "NVIDIA L40 GPU datasheet (2022)",
        notes="PyTorch's 'total capacity' 44.40 GiB (gpu-memory-totals.md)",
    ),
    CardSpec(
        "gh200-96g", "NVIDIA GH200 Grace Hopper Superchip 96GB", "nvidia",
        ("gh200", "gh200-96gb", "NVIDIA GH200 480GB"),
        97_280 * MIB, "measured", 4000 * G, 989.5 * T, 1979 * T, 1979 * T,
        "nvlink4", 450 * G, 450 * G, "NVIDIA GH200 Grace Hopper Superchip datasheet (2023)",
        notes="OpenCL's 97280 MB (gpu-memory-totals.md); the card to its Grace CPU: "
        "NVLink-C2C, 900 GB/s both ways",
    ),
    CardSpec(
        "gh200-144g", "NVIDIA GH200 Grace Hopper Superchip 144GB", "nvidia",
        ("gh200-144gb", "NVIDIA GH200 144G HBM3e"),
        _marketed(144), "marketed", 4900 * G, 989.5 * T, 1979 * T, 1979 * T,
        "nvlink4", 450 * G, 450 * G, "NVIDIA GH200 Grace Hopper Superchip datasheet (2024)",
        notes="the card to its Grace CPU: NVLink-C2C, 900 GB/s both ways",
    ),
    CardSpec(
        "a10-24g", "NVIDIA A10", "nvidia",
        ("a10", "a10-24gb", "NVIDIA A10"),
        int(22.18 * GIB), "measured", 600 * G, 125 * T, None, 250 * T,
        "pcie4", PCIE4, PCIE4, "NVIDIA A10 Tensor Core GPU datasheet (2021)",
        notes="PyTorch 'total capacity' 22.18 GiB",
    ),
    CardSpec(
        "a10g-24g", "NVIDIA A10G (AWS)", "nvidia",
        ("a10g", "a10g-24gb", "NVIDIA A10G"),
        int(22.18 * GIB), "measured", 600 * G, None, None, None,
        "pcie4", PCIE4, PCIE4, "AWS EC2 G5 instance page (memory and bandwidth only)",
        notes="memory as the A10's (23028 MiB in nvidia-smi for both); tensor rates unpublished",
    ),
    CardSpec(
        "t4-16g", "NVIDIA T4", "nvidia",
        ("t4", "t4-16gb", "Tesla T4", "NVIDIA T4"),
        int(14.75 * GIB), "measured", 320 * G, 65 * T, None, 130 * T,
        "pcie3", PCIE3, PCIE3, "NVIDIA T4 Tensor Core GPU datasheet (2019)",
        notes="PyTorch 'total capacity' 14.75 GiB (Colab); no bf16: the fp16 mixed-precision rate",
    ),
    CardSpec(
        "p40-24g", "NVIDIA Tesla P40", "nvidia",
        ("p40", "p40-24gb", "Tesla P40"),
        _marketed(24), "marketed", 346 * G, 11.76 * T, None, 47 * T,
        "pcie3", PCIE3, PCIE3, "NVIDIA Tesla P40 datasheet (2016)",
        notes="no tensor cores: the 16-bit figure is its fp32 rate; int8 is dp4a",
    ),
    CardSpec(
        "b200-180g", "NVIDIA B200", "nvidia",
        ("b200", "b200-180gb", "NVIDIA B200"),
        int(178.35 * GIB), "measured", 8000 * G, 2250 * T, 4500 * T, 4500 * T,
        "nvlink5", 900 * G, PCIE5, "NVIDIA HGX B200 datasheet (2024), per GPU: platform ÷ 8",
        notes="CUDA device properties 178.35 GiB (pytorch/ao#4002)",
    ),
    CardSpec(
        "gb200-186g", "NVIDIA GB200 (Blackwell GPU of a GB200 superchip)", "nvidia",
        ("gb200", "gb200-186gb", "gb200-192g", "NVIDIA GB200"),
        _marketed(186), "marketed", 8000 * G, 2500 * T, 5000 * T, 5000 * T,
        "nvlink5", 900 * G, 450 * G, "NVIDIA GB200 NVL72 datasheet (2024), per GPU: rack ÷ 72",
        notes="host link is NVLink-C2C to Grace, 900 GB/s both ways",
    ),
    CardSpec(
        "rtxpro6000-96g", "NVIDIA RTX PRO 6000 Blackwell", "nvidia",
        ("rtxpro6000", "rtx-pro-6000", "rtx-pro-6000-96g", "rtxpro6000blackwell-96g",
         "rtxpro6000blackwellmaxq-96g", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
         "NVIDIA RTX PRO 6000 Blackwell Server Edition",
         "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"),
        (97_887 - 454) * MIB, "smi-reserve", 1792 * G, 500 * T, 1000 * T, 1000 * T,
        "pcie5", PCIE5, PCIE5, "NVIDIA RTX PRO 6000 Blackwell datasheet (2025): 4,000 AI TOPS",
        fields_derived=("bf16_flops", "fp8_flops", "int8_ops"),
        notes="nvidia-smi 97887 MiB (Max-Q) less 454 MiB; " + BLACKWELL_AI_TOPS + " (no halving)",
    ),
    CardSpec(
        "rtx4000ada-20g", "NVIDIA RTX 4000 Ada Generation", "nvidia",
        ("rtx4000ada", "rtx-4000-ada", "rtx4000adageneration-20g",
         "NVIDIA RTX 4000 Ada Generation"),
        _marketed(20), "marketed", 360 * G, 76.7 * T, 153.4 * T, 153.4 * T,
        "pcie4", PCIE4, PCIE4,
        "NVIDIA RTX 4000 Ada datasheet (2023): 306.8 TFLOPS FP8 sparse, 360 GB/s",
        fields_derived=("bf16_flops", "int8_ops"),
        notes="bf16 = half the fp8 rate, int8 = the fp8 rate (Ada's ratios, as the RTX 6000 Ada)",
    ),
    CardSpec(
        "rtx5000ada-32g", "NVIDIA RTX 5000 Ada Generation", "nvidia",
        ("rtx5000ada", "rtx-5000-ada", "rtx5000adageneration-32g",
         "NVIDIA RTX 5000 Ada Generation"),
        _marketed(32), "marketed", 576 * G, 261.1 * T, 522.2 * T, 522.2 * T,
        "pcie4", PCIE4, PCIE4,
        "NVIDIA RTX 5000 Ada datasheet (2023): 1,044.4 TFLOPS FP8 sparse, 576 GB/s",
        fields_derived=("bf16_flops", "int8_ops"),
        notes="bf16 = half the fp8 rate, int8 = the fp8 rate (Ada's ratios, as the RTX 6000 Ada)",
    ),
    CardSpec(
        "gb10-128g", "NVIDIA GB10 (DGX Spark)", "nvidia",
        ("gb10", "dgx-spark", "dgxspark-128g", "NVIDIA GB10", "NVIDIA DGX Spark"),
        _marketed(128), "marketed", 273 * G, 125 * T, 250 * T, 250 * T,
        "none", 0.0, 273 * G,
        "NVIDIA DGX Spark specifications (2025): 1 PFLOP FP4 sparse, 128 GB LPDDR5x at 273 GB/s",
        fields_derived=("bf16_flops", "fp8_flops", "int8_ops"),
        notes="one GPU sharing the machine's 128 GB with its Grace CPU; "
        + BLACKWELL_AI_TOPS + " (no halving); the host link is the shared memory",
    ),
    CardSpec(
        "rtxa5000-24g", "NVIDIA RTX A5000", "nvidia",
        ("a5000", "rtx-a5000", "rtxa5000", "NVIDIA RTX A5000"),
        (24_564 - 454) * MIB, "smi-reserve", 768 * G, 111.1 * T, None, 222.2 * T,
        "pcie4", PCIE4, PCIE4, "NVIDIA RTX A5000 datasheet (2021)",
        fields_derived=("int8_ops",),
        notes="nvidia-smi 24564 MiB (fixtures/fleet/nvidia-smi-csv-rtx-a5000-noheader.txt) "
        "less the H100's reserve; int8 = 2 × fp16, as on the RTX A6000",
    ),
    CardSpec(
        "rtxa6000-48g", "NVIDIA RTX A6000", "nvidia",
        ("a6000", "rtx-a6000", "rtxa6000", "NVIDIA RTX A6000"),
        47_803_596_800, "measured", 768 * G, 154.8 * T, None, 309.7 * T,
        "pcie4", PCIE4, PCIE4, "NVIDIA RTX A6000 datasheet (2020)",
        fields_derived=("int8_ops",),
        notes="memory: the L40S's CUDA total (both 46068 MiB in nvidia-smi); int8 = 2 × fp16",
    ),
    CardSpec(
        "rtx6000ada-48g", "NVIDIA RTX 6000 Ada Generation", "nvidia",
        ("rtx6000ada", "rtx-6000-ada", "rtx6000adageneration-48g",
         "NVIDIA RTX 6000 Ada Generation"),
        _marketed(48), "marketed", 960 * G, 364.25 * T, 728.5 * T, 728.5 * T,
        "pcie4", PCIE4, PCIE4, "NVIDIA RTX 6000 Ada datasheet (2022): 1,457 TFLOPS FP8 sparse",
        fields_derived=("bf16_flops", "int8_ops"),
        notes="bf16 = half the fp8 rate, int8 = the fp8 rate (Ada's ratios)",
    ),
    # --- NVIDIA desktop ---------------------------------------------------------------------
    CardSpec(
        "rtx2080ti-11g", "NVIDIA GeForce RTX 2080 Ti", "nvidia",
        ("rtx2080ti", "2080ti", "NVIDIA GeForce RTX 2080 Ti"),
        _marketed(11), "marketed", 616 * G, 53.8 * T, None, 215.2 * T,
        "pcie3", PCIE3, PCIE3, "NVIDIA Turing GPU architecture whitepaper (2018), appendix A",
        notes="no bf16: fp16 with FP32 accumulate",
    ),
    CardSpec(
        "rtx3060-12g", "NVIDIA GeForce RTX 3060 12GB", "nvidia",
        ("rtx3060", "3060", "NVIDIA GeForce RTX 3060"),
        _marketed(12), "marketed", 360 * G, 25.5 * T, None, 101.9 * T,
        "pcie4", PCIE4, PCIE4, "NVIDIA GeForce RTX 3060 specifications (GA106, 112 tensor cores "
        "at 1.78 GHz, 360 GB/s)",
        fields_derived=("bf16_flops", "int8_ops"),
        notes="rates from its tensor cores and clock, GA102's ratios (int8 4 × fp16 with FP32 "
        "accumulate), as the RTX 3080's",
    ),
    CardSpec(
        "rtx3070-8g", "NVIDIA GeForce RTX 3070", "nvidia",
        ("rtx3070", "3070", "NVIDIA GeForce RTX 3070"),
        _marketed(8), "marketed", 448 * G, 40.6 * T, None, 162.6 * T,
        "pcie4", PCIE4, PCIE4, GA102_PAPER + " (its RTX 3070 column)",
    ),
    CardSpec(
        "rtx3080-10g", "NVIDIA GeForce RTX 3080 10GB", "nvidia",
        ("rtx3080", "3080", "NVIDIA GeForce RTX 3080"),
        _marketed(10), "marketed", 760.3 * G, 59.5 * T, None, 238 * T,
        "pcie4", PCIE4, PCIE4, GA102_PAPER,
    ),
    CardSpec(
        "rtx3080ti-12g", "NVIDIA GeForce RTX 3080 Ti", "nvidia",
        ("rtx3080ti", "3080ti", "NVIDIA GeForce RTX 3080 Ti"),
        _marketed(12), "marketed", 912.4 * G, 68.2 * T, None, 272.8 * T,
        "pcie4", PCIE4, PCIE4, GA102_PAPER,
    ),
    CardSpec(
        "rtx3090-24g", "NVIDIA GeForce RTX 3090", "nvidia",
        ("rtx3090", "3090", "NVIDIA GeForce RTX 3090"),
        25_327_697_920, "measured", 936.2 * G, 71 * T, None, 284 * T,
        "pcie4", PCIE4, PCIE4, GA102_PAPER,
        notes="deviceQuery, RTX 3090; an NVLink bridge (112.5 GB/s both ways) is an override",
    ),
    CardSpec(
        "rtx4060-8g", "NVIDIA GeForce RTX 4060", "nvidia",
        ("rtx4060", "4060", "NVIDIA GeForce RTX 4060"),
        _marketed(8), "marketed", 272 * G, 30.25 * T, 60.5 * T, 121 * T,
        "pcie4", 16 * G, 16 * G, "NVIDIA GeForce RTX 4060 specifications: 242 AI TOPS, PCIe 4.0 x8",
        fields_derived=("bf16_flops", "fp8_flops", "int8_ops"),
        notes=ADA_AI_TOPS,
    ),
    CardSpec(
        "rtx4060ti-16g", "NVIDIA GeForce RTX 4060 Ti 16GB", "nvidia",
        ("rtx4060ti", "4060ti", "NVIDIA GeForce RTX 4060 Ti"),
        _marketed(16), "marketed", 288 * G, 44.1 * T, 88.25 * T, 176.5 * T,
        "pcie4", 16 * G, 16 * G,
        "NVIDIA GeForce RTX 4060 Ti specifications: 353 AI TOPS, PCIe 4.0 x8",
        fields_derived=("bf16_flops", "fp8_flops", "int8_ops"),
        notes=ADA_AI_TOPS,
    ),
    CardSpec(
        "rtx4070ti-12g", "NVIDIA GeForce RTX 4070 Ti", "nvidia",
        ("rtx4070ti", "4070ti", "NVIDIA GeForce RTX 4070 Ti"),
        _marketed(12), "marketed", 504 * G, 80.1 * T, 160.3 * T, 320.5 * T,
        "pcie4", PCIE4, PCIE4, "NVIDIA GeForce RTX 4070 Ti specifications: 641 AI TOPS, 504 GB/s",
        fields_derived=("bf16_flops", "fp8_flops", "int8_ops"),
        notes=ADA_AI_TOPS,
    ),
    CardSpec(
        "rtx4080-16g", "NVIDIA GeForce RTX 4080", "nvidia",
        ("rtx4080", "4080", "NVIDIA GeForce RTX 4080"),
        _marketed(16), "marketed", 716.8 * G, 97.5 * T, 194.9 * T, 389.9 * T,
        "pcie4", PCIE4, PCIE4, ADA_PAPER,
    ),
    CardSpec(
        "rtx4090-24g", "NVIDIA GeForce RTX 4090", "nvidia",
        ("rtx4090", "4090", "NVIDIA GeForce RTX 4090"),
        25_386_352_640, "measured", 1008 * G, 165.2 * T, 330.3 * T, 660.6 * T,
        "pcie4", PCIE4, PCIE4, ADA_PAPER,
        notes="deviceQuery, RTX 4090",
    ),
    CardSpec(
        "rtx5090-32g", "NVIDIA GeForce RTX 5090", "nvidia",
        ("rtx5090", "5090", "NVIDIA GeForce RTX 5090"),
        33_677_180_928, "measured", 1792 * G, 209.5 * T, 419 * T, 838 * T,
        "pcie5", PCIE5, PCIE5, "NVIDIA GeForce RTX 5090 specifications: 3,352 AI TOPS",
        fields_derived=("bf16_flops", "fp8_flops", "int8_ops"),
        notes="deviceQuery, RTX 5090; " + BLACKWELL_AI_TOPS,
    ),
    # --- AMD ------------------------------------------------------------------------------
    CardSpec(
        "mi300x-192g", "AMD Instinct MI300X", "amd",
        ("mi300x", "mi300x-192gb", "AMD Instinct MI300X", "amdinstinctmi300x-192g"),
        196_592 * MIB, "measured", 5300 * G, 1307.4 * T, 2614.9 * T, 2614.9 * T,
        "infinity-fabric", 448 * G, PCIE5, "AMD Instinct MI300X data sheet (2023)",
        notes="HIP totalGlobalMem 196592 MiB; Infinity Fabric 7 links, 896 GB/s both ways",
    ),
    CardSpec(
        "mi325x-256g", "AMD Instinct MI325X", "amd",
        ("mi325x", "mi325x-256gb", "AMD Instinct MI325X"),
        _hbm_gib(256), "hbm-gib", 6000 * G, 1307.4 * T, 2614.9 * T, 2614.9 * T,
        "infinity-fabric", 448 * G, PCIE5, "AMD Instinct MI325X data sheet (2024)",
    ),
    CardSpec(
        "mi355x-288g", "AMD Instinct MI355X", "amd",
        ("mi355x", "mi355x-288gb", "AMD Instinct MI355X"),
        _hbm_gib(288), "hbm-gib", 8000 * G, 2516.6 * T, 5033.2 * T, 5033.2 * T,
        "infinity-fabric", 537.6 * G, PCIE5, "AMD Instinct MI355X data sheet (2025)",
        notes="Infinity Fabric 7 links at 153.6 GB/s both ways; SGLang logged 287.18 GiB free "
        "(calibration/sglang-logs.jsonl, PR #18263)",
    ),
    CardSpec(
        "mi350x-288g", "AMD Instinct MI350X", "amd",
        ("mi350x", "mi350x-288gb", "AMD Instinct MI350X"),
        _hbm_gib(288), "hbm-gib", 8000 * G, 2306.9 * T, 4613.8 * T, 4613.8 * T,
        "infinity-fabric", 537.6 * G, PCIE5, "AMD Instinct MI350X data sheet (2025)",
        fields_derived=("bf16_flops", "fp8_flops", "int8_ops"),
        notes="the MI355X's CDNA 4 at 2.2 GHz, not 2.4: its rates × 2.2/2.4; memory and links "
        "as the MI355X's",
    ),
    CardSpec(
        "rx7900xtx-24g", "AMD Radeon RX 7900 XTX", "amd",
        ("rx7900xtx", "7900xtx", "AMD Radeon RX 7900 XTX", "Radeon RX 7900 XTX"),
        _marketed(24), "marketed", 960 * G, 122.8 * T, None, 122.8 * T,
        "pcie4", PCIE4, PCIE4, "AMD Radeon RX 7900 XTX specifications (amd.com)",
        fields_derived=("int8_ops",),
        notes="fp16 (WMMA) rate; int8 WMMA runs at the fp16 rate on RDNA 3",
    ),
    CardSpec(
        "radeon8060s-96g", "AMD Radeon 8060S (Ryzen AI Max+ 395, Strix Halo)", "amd",
        ("radeon8060s", "8060s", "strix-halo", "strixhalo-96g", "AMD Radeon 8060S Graphics",
         "AMD Radeon(TM) 8060S Graphics"),
        _marketed(96), "marketed", 256 * G, 59.4 * T, None, 59.4 * T,
        "none", 0.0, 256 * G,
        "AMD Ryzen AI Max+ 395 specifications (2025): 40 RDNA 3.5 CUs at 2.9 GHz, 256-bit "
        "LPDDR5X-8000",
        fields_derived=("bf16_flops", "int8_ops"),
        notes="one GPU sharing the machine's memory: 96 GB is the most its firmware gives the "
        "GPU of 128 GB; fp16 WMMA 40 CUs × 512 × 2.9 GHz; int8 at the fp16 rate (RDNA 3)",
    ),
)

# fmt: on

# Apple silicon, for llama.cpp: one GPU sharing the machine's memory. A chip comes in several
# memory sizes, each its own class. Bandwidth and memory options are Apple's (tech specs pages).
# GPU FP32 TFLOPS are Apple's for M1 Max (10.4), M1 Ultra (21), M2 Max (13.6) and M2 Ultra (27.2);
# for M3 and M4 Apple gives none: cores × 128 ALUs × 2 × the GPU clock (M3 1.398 GHz, M4 1.578 GHz),
# derived. Apple GPUs run fp16 at the fp32 rate and have no int8 matrix units.
APPLE_SPECS = "Apple tech specifications pages (memory options, bandwidth); GPU TFLOPS per notes"

# The share of unified memory Metal lets one process use (recommendedMaxWorkingSetSize), by
# memory size in GB, as llama.cpp printed it on real Macs (macOS 14-26): 8 GB 5726.63 MB, 16 GB
# 11453.25 MB (2/3), 24 GiB 19,069,665,280 B, 32 GB 26800.60 MB, 36 GB 30150.67 MB, 64 GB
# 55,662.79 MB (51539.61 on older macOS: the smaller is kept), 128 GB 115,448,725,504 B, 256 GB
# 239,143,780,352 B. Sizes in between take the share of the next smaller size measured, which
# is never more than theirs.
METAL_SHARE: dict[int, float] = {
    8: 2 / 3,
    16: 2 / 3,
    24: 19_069_665_280 / (24 * GIB),
    32: 26_800.60e6 / (32 * GIB),
    36: 30_150.67e6 / (36 * GIB),
    64: 51_539.61e6 / (64 * GIB),
    128: 115_448_725_504 / (128 * GIB),
    256: 239_143_780_352 / (256 * GIB),
}


def metal_share(gb: int) -> float:
    """The share of `gb` GB of unified memory Metal lets one process use."""
    return METAL_SHARE[max(k for k in METAL_SHARE if k <= gb)]


# (chip, GPU cores, bandwidth GB/s, GPU TFLOPS, TFLOPS derived?, memory sizes in GB)
_APPLE: tuple[tuple[str, int, float, float, bool, tuple[int, ...]], ...] = (
    # The M1's GPU has 8 cores or, in the base MacBook Air and iMac, 7: 2.6 TFLOPS Apple's, the
    # 7-core's in proportion.
    ("m1", 7, 68.25, 2.29, True, (8, 16)),
    ("m1-max", 32, 400, 10.4, False, (32, 64)),
    ("m1-ultra", 64, 800, 21.0, False, (64, 128)),
    ("m2-max", 38, 400, 13.6, False, (32, 64, 96)),
    ("m2-ultra", 76, 800, 27.2, False, (64, 128, 192)),
    ("m3", 10, 100, 3.6, True, (8, 16, 24)),
    ("m3-max", 30, 300, 10.7, True, (36, 96)),  # the 30-core GPU comes with 36 or 96 GB
    ("m3-max", 40, 400, 14.3, True, (48, 64, 128)),  # the 40-core with 48, 64 or 128 GB
    ("m3-ultra", 80, 819, 28.6, True, (96, 256, 512)),
    ("m4-max", 32, 410, 12.9, True, (36,)),
    ("m4-max", 40, 546, 16.2, True, (48, 64, 128)),
)


def _apple(chip: str, cores: int, bw: float, tflops: float, derived: bool, gb: int) -> CardSpec:
    words = chip.replace("-", " ").title()
    return CardSpec(
        f"{chip}-{gb}g", f"Apple {words} ({cores}-core GPU) {gb}GB", "apple",
        (f"apple-{chip}-{gb}g", f"{chip}-{gb}gb", f"Apple {words} {gb}GB"),
        int(gb * GIB * metal_share(gb)), "metal", bw * G, tflops * T, None, tflops * T,
        "none", 0.0, bw * G, APPLE_SPECS,
        fields_derived=("int8_ops",) + (("bf16_flops",) if derived else ()),
        notes=f"Metal lets a process use {metal_share(gb):.0%} of {gb} GB",
        unified_bytes=gb * GIB,
    )  # fmt: skip


CARDS += tuple(_apple(c, n, bw, tf, d, gb) for c, n, bw, tf, d, sizes in _APPLE for gb in sizes)
# The M1 Max with a 24-core GPU (and 32 GB) beside the 32-core one of the same memory: its own
# class, 24/32 of the 32-core's 10.4 TFLOPS, the same 400 GB/s.
CARDS += (
    dataclasses.replace(
        _apple("m1-max", 24, 400, 7.8, True, 32),
        key="m1-max-24c-32g",
        aliases=("apple-m1-max-24c-32g", "m1-max-24c-32gb", "Apple M1 Max 24-core 32GB"),
    ),
)


def _norm(name: str) -> str:
    """A name as compared: lower case, "80GB" as "80g", and nothing but letters, digits and dots."""
    s = re.sub(r"(\d)\s*gb\b", r"\1g", name.strip().lower())
    return re.sub(r"[^a-z0-9.]", "", s)


BY_KEY: dict[str, CardSpec] = {c.key: c for c in CARDS}
_BY_NAME: dict[str, str] = {}
for _c in CARDS:
    for _n in (_c.key, *_c.aliases):
        _BY_NAME.setdefault(_norm(_n), _c.key)

_MIG = re.compile(r"^(.*)-mig-(\d+)g\.(\d+)gb$")


_SIZED = re.compile(r"^(.*?)[-_ ](\d+)\s*gb?$")  # "a6000-48g", "h100 80GB"


# Names of more than one card of different memory: "a100" is sold with 40 and 80 GB, and a plan
# for the 80 GB card runs an A100-40GB out of memory. Such a name needs its size.
AMBIGUOUS: dict[str, tuple[str, ...]] = {"a100": ("a100-40g", "a100-80g")}


def resolve(name: str) -> str | None:
    """The class key a name means: exact, case- and spacing-insensitive ("H100 80GB HBM3",
    "h100-80gb" and "h100" are all "h100-80g"), or a known name with the size its class has
    ("a6000-48g" is "rtxa6000-48g", "h100-96g" is nothing); None for a name the table does not
    know."""
    if key := _BY_NAME.get(_norm(name)):
        return key
    m = _SIZED.match(name.strip().lower())
    if m and (key := _BY_NAME.get(_norm(m.group(1)))) and key.endswith(f"-{m.group(2)}g"):
        return key
    return None


def typo_of(name: str) -> str | None:
    """The known class a name not in the table was surely meant to be: as close as one changed
    letter ("h10-80g" for "h100-80g") and of the same size. A name further off, or of another
    size, may be a card the table lacks, and is left to the caller to warn about."""
    norm = _norm(name)
    size = _SIZED.match(name.strip().lower())
    for hit in difflib.get_close_matches(norm, list(_BY_NAME), n=1, cutoff=0.85):
        key = _BY_NAME[hit]
        if size and key.endswith(f"-{size.group(2)}g"):
            return key
    return None


def suggest(name: str, n: int = 3) -> tuple[str, ...]:
    """The known class keys closest to an unknown name, best first, for "did you mean"."""
    norm = _norm(name)
    out: list[str] = []
    for hit in difflib.get_close_matches(norm, list(_BY_NAME), n=4 * n, cutoff=0.6):
        key = _BY_NAME[hit]
        if key not in out:
            out.append(key)
    return tuple(out[:n])


def consumer(gpu_class: str) -> bool:
    """A desktop's card (GeForce, Radeon, Apple silicon), not a data centre's or a workstation's:
    one that serves one person, and plans at a desktop's context (issue 34 item 6)."""
    s = spec(gpu_class)
    if s is None:
        return False
    return s.vendor == "apple" or any(w in s.name for w in ("GeForce", "Radeon"))


def spec(gpu_class: str) -> CardSpec | None:
    """The card a class names (by key or alias), or None.

    A MIG instance (`h100-80g-mig-3g.40gb`) is its card cut to size: `g` of the 7 compute slices
    (an A100's or H100's sevenths) and the memory bandwidth in proportion to its memory, since
    each memory slice brings its own share of the card's memory controllers; it has no link to
    other instances. `memory_bytes` is left at the card's: the instance's own is fleet.py's.
    """
    m = _MIG.match(gpu_class.strip().lower())
    if m:
        card = spec(m.group(1))
        if card is None:
            return None
        compute = min(1.0, int(m.group(2)) / 7)
        memory = min(1.0, int(m.group(3)) * 1e9 / card.memory_bytes)

        def scale(x: float | None) -> float | None:
            return None if x is None else x * compute

        return dataclasses.replace(
            card,
            key=gpu_class.strip().lower(),
            memory_bandwidth=card.memory_bandwidth * memory,
            bf16_flops=scale(card.bf16_flops),
            fp8_flops=scale(card.fp8_flops),
            int8_ops=scale(card.int8_ops),
            link="none",
            link_bandwidth=0.0,
        )
    key = resolve(gpu_class)
    return BY_KEY[key] if key else None


# What CUDA (or HIP) reports as a card's total memory, for the classes whose total was measured
# or worked out from nvidia-smi's (see CardSpec.memory_kind). fleet.memory_from_class and the
# machine importer read this; classes sold at a size and never measured are not in it.
REPORTED_TOTALS: dict[str, int] = {
    c.key: c.memory_bytes for c in CARDS if c.memory_kind in ("measured", "smi-reserve")
}


# --- What a fleet entry may say about its cards, and about its fabrics ------------------------

# Fleet-file key → (CardSpec field, multiplier into the field's unit). Numbers are in the units
# people read on datasheets: GB/s (decimal, one way for links), TFLOPS, TOPS.
OVERRIDE_KEYS: dict[str, tuple[str, float]] = {
    "memory_bandwidth_gbs": ("memory_bandwidth", G),
    "bf16_tflops": ("bf16_flops", T),
    "fp8_tflops": ("fp8_flops", T),
    "int8_tops": ("int8_ops", T),
    "link_gbs": ("link_bandwidth", G),
    "pcie_gbs": ("pcie_bandwidth", G),
}
# The most a fleet file may say of a card's bandwidth (GB/s) or tensor rate (TFLOPS, TOPS).
MAX_FIGURE = 1_000_000
LINKS = ("nvlink3", "nvlink4", "nvlink5", "infinity-fabric", "pcie3", "pcie4", "pcie5", "none")


def override(card: CardSpec | None, fields: Mapping[str, object], key: str = "") -> CardSpec:
    """A card with a fleet entry's figures in place of the table's.

    `fields` holds fleet-file keys (OVERRIDE_KEYS, and `link` naming one of LINKS); keys it does
    not name are ignored, so the whole pool table can be passed. With no card (a class the table
    does not know), `memory_bandwidth_gbs` is required and makes one, named `key`. A bad value is
    a ValueError whose message names the key and what is allowed.
    """
    changes: dict[str, object] = {}
    for name, (attr, unit) in OVERRIDE_KEYS.items():
        if name not in fields:
            continue
        value = fields[name]
        # Bounded: a NaN or an infinity would time every step at zero or forever, and past a
        # million GB/s or TFLOPS no card exists, so such a figure is a typo.
        if (
            isinstance(value, bool) or not isinstance(value, (int, float))
            or not 0 < value <= MAX_FIGURE
        ):  # fmt: skip
            raise ValueError(
                f"{name} is {value!r}; it must be a number above 0, at most {MAX_FIGURE:,}"
            )
        changes[attr] = float(value) * unit
    if "link" in fields:
        link = str(fields["link"]).strip().lower()
        if link not in LINKS:
            close = difflib.get_close_matches(link, LINKS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"link is {link!r}; allowed: {', '.join(LINKS)}{hint}")
        changes["link"] = link
    if card is None:
        if "memory_bandwidth" not in changes:
            raise ValueError(
                f"{key!r} is not a card llmfit knows, so its speed needs memory_bandwidth_gbs"
            )
        card = CardSpec(
            key, key, "nvidia", (), 0, "marketed", 0.0, None, None, None, "pcie4", PCIE4, PCIE4,
            "the fleet file",
        )  # fmt: skip
    changes["source"] = card.source + " (with fleet overrides)"
    return dataclasses.replace(card, **changes)  # type: ignore[arg-type]


_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-z/]*)\s*$", re.I)
# A fabric whose bandwidth is not stated is taken as one 400 Gb/s NDR InfiniBand port a GPU, as
# DGX H100/H200 and HGX B200 nodes are built.
DEFAULT_FABRIC_BANDWIDTH = 400e9 / 8


def fabric_bandwidth(value: str | float) -> float:
    """Bytes a second, one way, from a fabric's stated rate: "400 Gb/s", "400Gbps", "50 GB/s",
    or a bare number, read as Gb/s as network ports are sold. A ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"fabric bandwidth {value!r} is not a rate like '400 Gb/s'")
    if isinstance(value, (int, float)):
        number, unit = float(value), "gb/s"
    else:
        m = _RATE.match(value)
        if not m:
            raise ValueError(f"fabric bandwidth {value!r} is not a rate like '400 Gb/s'")
        number, unit = float(m.group(1)), m.group(2) or "Gb/s"
    bits = {"gb/s": 1e9 / 8, "gbps": 1e9 / 8, "gbit/s": 1e9 / 8, "tb/s": 1e12 / 8}
    byte = {"GB/s": 1e9, "GBps": 1e9, "TB/s": 1e12}
    if unit in byte:
        factor = byte[unit]
    elif unit.lower() in bits and not unit.startswith("GB"):
        factor = bits[unit.lower()]
    else:
        raise ValueError(f"fabric bandwidth {value!r}: the unit must be Gb/s, Gbps or GB/s")
    if number <= 0:
        raise ValueError(f"fabric bandwidth {value!r} must be above 0")
    return number * factor


# Families of cards that an engine's fitted efficiencies are looked up by (plan/engines/
# *_speed.py): cards of one family share the kernels an engine runs on them, so the share of
# their bandwidth and tensor rate it reaches is fitted once for the family, from whichever of its
# cards the measured runs used. A key not named here is its vendor's "other" family.
FAMILIES: tuple[tuple[str, str], ...] = (
    (r"^(h100|h200|h800|h20|gh200)", "nvidia-hopper"),
    (r"^(b200|b300|gb200|gb300|gb10)", "nvidia-blackwell"),
    (r"^(a100|a800|a30)", "nvidia-ampere"),
    (r"^(l4|l40|a10|rtxa|rtx\d+ada|rtxpro|t4|p40)", "nvidia-workstation"),
    (r"^rtx\d", "nvidia-geforce"),
    (r"^mi\d", "amd-instinct"),
    (r"^(rx|radeon)", "amd-radeon"),
)


def family(key: str) -> str:
    """The family a card class belongs to (a MIG instance: its card's), for fitted efficiencies:
    "nvidia-hopper", "amd-instinct", "apple", … ; "other" for a class the table does not know."""
    base = _MIG.sub(r"\1", key.strip().lower())
    card = BY_KEY.get(base)
    for pattern, name in FAMILIES:
        if re.match(pattern, base):
            return name
    if card is not None:
        return {"apple": "apple", "amd": "amd-other", "nvidia": "nvidia-other"}[card.vendor]
    return "other"
