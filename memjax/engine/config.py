"""Engine configuration, per-request sampling parameters and completions.

Owns: `EngineConfig` (every static shape of the compiled generation loop: one compile per config), grouped as the
shapes and scheduling a user sets at its top level, `kv: KVCacheOptions` (the KV pool: pages or a byte budget, dtype
and fp8 scales) and `kernels: KernelOptions` (measured kernel / compile switches), so the knobs a run sets stay
apart from the ones a GPU measurement decides; `SamplingParams` (per request, validated), `Completion` (what
generate returns) and `KVHandle` (the retained pages of a finished sequence, for multi-turn continuation).
Invariants: each group validates its own fields, EngineConfig the rules across them; window (max tokens per
sequence) is a multiple of page_size; the pool holds at least one full window, one spare page and the null page.
Data parallelism (`data_parallel` = D > 1): max_slots, prefill_slots, queue_size, token_budget and kv.num_pages /
kv_cache_gib / kv_cache_bytes are TOTALS split evenly into D device groups (each count divides by D; every group's
pool has its own null page); `per_device(D)` is the config one group's loop compiles for, `over_groups(D)` its
inverse (D groups each running a given one-group config: the frozen engines' layout). `tensor_parallel` = T
devices per group split the heads and the pool's KV heads (each device holds 1/(D x T) of the pool).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

FINISH_STOP, FINISH_LENGTH, FINISH_WINDOW, FINISH_PREEMPTED = 0, 1, 2, 3
FINISH_NAMES = {FINISH_STOP: "stop", FINISH_LENGTH: "length", FINISH_WINDOW: "window"}
OVERLONG_POLICIES = ("error", "truncate_left")
WEIGHT_DTYPES = ("compute", "bfloat16", "float16", "float32")
LOGPROB_MODES = ("raw", "processed")
SCHEDULES = ("auto", "split", "mixed")
LAYER_LOOPS = ("scan", "unrolled")
KV_DTYPES = ("compute", "float8_e4m3fn")
FP8_E4M3_MAX = 448.0  # largest finite float8_e4m3fn; stored K/V are clipped to it (the cast would give NaN)
AUTO_PREFILL_CAP = 8192  # prefill tokens per mixed round when token_budget = 0


def _positive_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


@dataclass(frozen=True)
class KVCacheOptions:
    """The paged KV pool: its size (pages or a byte budget) and its storage dtype."""

    num_pages: int | None = None  # KV pages in the pool (incl. the null page); None -> from kv_cache_gib / kv_cache_bytes
    # the KV pool's budget per engine, in GiB (kv_cache_gib) or bytes (kv_cache_bytes; set at most one).
    # Neither -> the pool fills each device up to memory_utilization of its memory limit when the engine is built
    # (GPU), or 1 GiB at most (CPU)
    kv_cache_gib: float | None = None
    kv_cache_bytes: int | None = None
    # the share of a device's memory limit the process may hold once the default pool is allocated (what the
    # trainer, the engine's weights and the pool take together; vLLM's gpu_memory_utilization): 0.9 leaves 10% of
    # the device for what the plan cannot see (allocator fragmentation, cuBLAS / cuDNN workspaces, NCCL buffers)
    memory_utilization: float = 0.9
    # dtype of the paged KV pool. "compute" = the model's compute dtype (bf16 for real configs);
    # "float8_e4m3fn" halves the pool's bytes (twice the tokens per GiB, half the KV read per decode step): K/V
    # are stored as clip(x / k_scale (v_scale), +-448) and read back times the scale (folded into the query
    # and the attention output, so the kernels only upcast the loaded page). Not for RL until its log-prob
    # gap is measured on real weights (benchmarks/kv_fp8_gap.py): memjax.train refuses it without
    # the old log-prob recompute. Pallas and reference attention only (the Mosaic kernel takes bf16/f16 pools)
    kv_dtype: str = "compute"
    k_scale: float = 1.0  # per-tensor scales of the fp8 pool (vLLM's default without calibration: 1.0)
    v_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.num_pages is not None and (not isinstance(self.num_pages, int) or isinstance(self.num_pages, bool)
                                           or self.num_pages <= 0):
            raise ValueError(f"KVCacheOptions.num_pages must be a positive int (or None), got {self.num_pages!r}")
        if self.kv_cache_gib is not None and self.kv_cache_bytes is not None:
            raise ValueError("KVCacheOptions: set kv_cache_gib or kv_cache_bytes, not both")
        for f in ("kv_cache_gib", "kv_cache_bytes"):
            v = getattr(self, f)
            if v is not None and not _positive_number(v):
                raise ValueError(f"KVCacheOptions.{f} must be a positive number (or None), got {v!r}")
        if not (isinstance(self.memory_utilization, (int, float)) and not isinstance(self.memory_utilization, bool)
                and 0 < self.memory_utilization <= 1):
            raise ValueError(f"KVCacheOptions.memory_utilization must be in (0, 1], got {self.memory_utilization!r}")
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(f"KVCacheOptions.kv_dtype must be one of {KV_DTYPES}, got {self.kv_dtype!r}")
        for f in ("k_scale", "v_scale"):
            if not _positive_number(getattr(self, f)):
                raise ValueError(f"KVCacheOptions.{f} must be a positive finite number, got {getattr(self, f)!r}")
        if self.kv_dtype == "compute" and (self.k_scale != 1.0 or self.v_scale != 1.0):
            raise ValueError("KVCacheOptions.k_scale / v_scale scale a float8 pool only: set kv_dtype='float8_e4m3fn' "
                             "or leave them at 1.0")

    @property
    def budget_bytes(self) -> int | None:
        """The configured pool budget in bytes (kv_cache_gib or kv_cache_bytes), None when unset."""
        if self.kv_cache_gib is not None:
            return int(self.kv_cache_gib * (1 << 30))
        return None if self.kv_cache_bytes is None else int(self.kv_cache_bytes)


@dataclass(frozen=True)
class KernelOptions:
    """Measured kernel and compile switches: which attention kernel, weight layout and fusions the loop compiles."""

    # paged attention: "reference" (pure JAX) | "pallas" | "mosaic" | "auto" (default: pallas on GPU for supported
    # page and head sizes, else reference; "mosaic": the Mosaic GPU decode kernel for Hopper+, prefill as "auto",
    # not the default until measured on a GPU; docs/engine.md). Measured on an H100 (benchmarks/results/paged_attention_nvidia-h100-80gb-hbm3.json,
    # one decode step at 8K context): the Pallas kernel is 7-15x faster than the reference at batch 64-256
    attention: str = "auto"
    # split-K partitions per sequence for the Pallas decode kernel; 0 = auto: 2 when max_slots x KV heads >= 256
    # (best or within 5% at batch 128-256 for the 1.5B and 7B shapes on the H100), else 4 (batch 64: 1.3-1.4x
    # faster than 1 split)
    decode_splits: int = 0
    # dtype of the engine's own copy of the weights. "compute" = the model's compute dtype (bf16 for the
    # real configs, fp32 for tiny): bit-identical to casting the master at use, at half the bytes for bf16
    weight_dtype: str = "compute"
    # the engine's weight layout (memjax/engine/weights.py; defaults until a GPU run decides):
    # "scan" = the model's stacked [L, ...] weights under lax.scan; "unrolled" = per-layer arrays, layers unrolled
    # (fixed weight addresses for XLA:GPU's command buffers, longer compile). Single-device engines only
    layers: str = "scan"
    fuse_projections: bool = False  # q/k/v and gate/up concatenated in the engine's copy: 2 GEMMs per layer, not 5
    # split schedule's decode rounds: each layer's q/k/v bias, RoPE, K/V page writes and the query's padding to the
    # attention kernel's 16-row blocks in one Pallas kernel (memjax/kernels/rope_kv.py) instead of six XLA kernels
    # (three slices of the fused projection, two scatters, one pad: benchmarks/gpu_aot_rounds.py). Off until a GPU
    # run times it. Single-device engines, split schedule ("auto" then resolves to split on CPU too);
    # with Pallas attention the kernel reads the padded rows as written, other back-ends get them unpadded
    fuse_rope_kv: bool = False
    # with fuse_rope_kv and Pallas attention: the decode kernel merges its split-K partials itself (the last program
    # of each sequence and kv head to finish does it, counted by an atomic) and writes the heads straight into the
    # [b, H, D] output (memjax/kernels/decode_merged.py), instead of an XLA fusion per layer that merges them and
    # slices the 16-row block back to G heads. Off until a GPU run checks it (its memory order is only exercised
    # there) and times it; other attention back-ends ignore it
    fuse_split_combine: bool = False
    # split schedule: compiled prefill chunk lengths. 0 = one [prefill_slots, prefill_chunk] shape (every round padded
    # to prefill_chunk); k > 0 = k lengths prefill_chunk * j / k (j = 1..k, rounded up to page_size) and the round
    # runs at the shortest that holds its longest chunk (that chunk padded by < 1/j at length j/k; one compiled
    # forward per length). Stats: prefill_executed (rows run) beside prefill_tokens (useful)
    prefill_buckets: int = 0
    # mixed schedule: row buckets below max_slots (max_slots / 4, / 16, ... while >= 4 rows; at most this many).
    # A round whose total need fits one runs its forward and LM head on that many rows, so the tail of a
    # skewed batch (few sequences still decoding) does not pay for max_slots rows. 0 = none (smallest = max_slots)
    small_rounds: int = 2
    compilation_cache_dir: str | None = None  # persistent XLA compilation cache

    def __post_init__(self) -> None:
        if self.attention not in ("reference", "pallas", "mosaic", "auto"):
            raise ValueError(f"KernelOptions.attention must be reference|pallas|mosaic|auto, got {self.attention!r}")
        if not isinstance(self.decode_splits, int) or self.decode_splits < 0:
            raise ValueError(f"KernelOptions.decode_splits must be >= 0 (0 = auto), got {self.decode_splits!r}")
        if self.weight_dtype not in WEIGHT_DTYPES:
            raise ValueError(f"KernelOptions.weight_dtype must be one of {WEIGHT_DTYPES}, got {self.weight_dtype!r}")
        if self.layers not in LAYER_LOOPS:
            raise ValueError(f"KernelOptions.layers must be one of {LAYER_LOOPS}, got {self.layers!r}")
        for f in ("fuse_projections", "fuse_rope_kv", "fuse_split_combine"):
            if not isinstance(getattr(self, f), bool):
                raise ValueError(f"KernelOptions.{f} must be a bool, got {getattr(self, f)!r}")
        if self.fuse_split_combine and not self.fuse_rope_kv:
            raise ValueError("KernelOptions.fuse_split_combine=True merges the splits of the fused decode step's "
                             "attention: set fuse_rope_kv=True too, or fuse_split_combine=False")
        if not isinstance(self.prefill_buckets, int) or isinstance(self.prefill_buckets, bool) \
                or self.prefill_buckets < 0:
            raise ValueError(f"KernelOptions.prefill_buckets must be an int >= 0, got {self.prefill_buckets!r}")
        if not isinstance(self.small_rounds, int) or isinstance(self.small_rounds, bool) or self.small_rounds < 0:
            raise ValueError(f"KernelOptions.small_rounds must be an int >= 0, got {self.small_rounds!r}")


@dataclass(frozen=True)
class EngineConfig:
    max_slots: int = 16  # sequences decoded together (decode batch)
    page_size: int = 16  # tokens per KV page
    window: int = 2048  # max tokens per sequence (prompt + generated)
    prefill_slots: int = 4  # sequences advanced together in a prefill round
    prefill_chunk: int = 256  # prompt tokens per sequence per prefill round
    queue_size: int = 0  # waiting requests visible to the device per call; 0 -> 2 * max_slots
    max_stop_ids: int = 4  # stop-token ids per request
    rounds_per_sync: int = 64  # device rounds between host syncs (upper bound)
    # step() returns early once a sequence finished and >= this many slots are idle with nothing queued
    # (chained agent turns: the host submits the follow-ups at once); 0 = off. generate() never does.
    idle_return: int = 0
    overlong_prompt: str = "error"  # "error" | "truncate_left" for prompts that leave no room to generate
    seed: int = 0  # base of per-request seeds when SamplingParams.seed is None
    progress: bool = True  # rich progress bar on generate() calls with many requests
    # round shape (memjax/engine/mixed.py): "split" = a padded [prefill_slots, prefill_chunk] prefill round
    # whenever a prompt is pending, else a [max_slots, 1] decode round; "mixed" = token-budget batching:
    # one ragged forward of every running sequence's decode token plus prefill chunks up to token_budget.
    # "auto" (default) = mixed on CPU, where it gave >= the split tokens/s, lower time-to-first-token and no
    # decode stalls (benchmarks/results/rollout_token_budget_tiny_cpu.json), split on GPUs: there the mixed
    # mixed round's speed with the ragged kernel (memjax/kernels/ragged_paged_attention.py) is not yet timed.
    # Split on CPU too with kernels.fuse_rope_kv. `resolve(backend)` decides it; the Engine runs the resolved config.
    schedule: str = "auto"
    # tokens per mixed round (>= max_slots); 0 -> max_slots + min(prefill_slots * prefill_chunk, 8192): every
    # decode token plus the split schedule's prefill round, capped (mixed rounds gather one page per token row)
    token_budget: int = 0
    # device groups the engine spans (one slot group + 1/D of the KV pool each, weights replicated);
    # 1 = one device (the default path); -1 = every device given to Engine (memjax.train: the mesh's)
    data_parallel: int = 1
    # devices per group that split the attention heads, KV heads (the pool) and MLP columns (Megatron style)
    tensor_parallel: int = 1
    kv: KVCacheOptions = field(default_factory=KVCacheOptions)  # the KV pool
    kernels: KernelOptions = field(default_factory=KernelOptions)  # measured kernel / compile switches

    def __post_init__(self) -> None:
        for f in ("max_slots", "page_size", "window", "prefill_slots", "prefill_chunk", "max_stop_ids",
                  "rounds_per_sync"):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"EngineConfig.{f} must be a positive int, got {v!r}")
        if not isinstance(self.kv, KVCacheOptions):
            raise ValueError(f"EngineConfig.kv must be a KVCacheOptions, got {self.kv!r}")
        if not isinstance(self.kernels, KernelOptions):
            raise ValueError(f"EngineConfig.kernels must be a KernelOptions, got {self.kernels!r}")
        kv, kn = self.kv, self.kernels
        if self.window % self.page_size:
            raise ValueError(f"EngineConfig.window={self.window} must be a multiple of page_size={self.page_size}")
        if self.prefill_slots > self.max_slots:
            raise ValueError(f"EngineConfig.prefill_slots={self.prefill_slots} exceeds max_slots={self.max_slots}")
        if kv.num_pages is not None and kv.num_pages < self.pages_per_seq + 2:
            raise ValueError(f"EngineConfig.kv.num_pages={kv.num_pages} must be >= window/page_size + 2 = "
                             f"{self.pages_per_seq + 2} (one full window, one page of headroom, the null page)")
        if self.overlong_prompt not in OVERLONG_POLICIES:
            raise ValueError(f"EngineConfig.overlong_prompt must be one of {OVERLONG_POLICIES}, "
                             f"got {self.overlong_prompt!r}")
        if not 0 <= self.idle_return <= self.max_slots:
            raise ValueError(f"EngineConfig.idle_return must be in [0, max_slots={self.max_slots}], got {self.idle_return}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"EngineConfig.schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.token_budget and (not isinstance(self.token_budget, int) or self.token_budget < self.max_slots):
            raise ValueError(f"EngineConfig.token_budget={self.token_budget!r} must be 0 (auto) or an int >= "
                             f"max_slots={self.max_slots} (every running sequence's decode token fits a round)")
        if self.queue_size < 0:
            raise ValueError(f"EngineConfig.queue_size must be >= 0, got {self.queue_size}")
        if not isinstance(self.data_parallel, int) or isinstance(self.data_parallel, bool) \
                or not (self.data_parallel >= 1 or self.data_parallel == -1):
            raise ValueError(f"EngineConfig.data_parallel must be >= 1 or -1 (all devices), got {self.data_parallel!r}")
        if not isinstance(self.tensor_parallel, int) or isinstance(self.tensor_parallel, bool) \
                or self.tensor_parallel < 1:
            raise ValueError(f"EngineConfig.tensor_parallel must be >= 1, got {self.tensor_parallel!r}")
        if kn.prefill_buckets > self.prefill_chunk:
            raise ValueError(f"EngineConfig.kernels.prefill_buckets must be an int in [0, prefill_chunk="
                             f"{self.prefill_chunk}], got {kn.prefill_buckets!r}")
        single = self.data_parallel == 1 and self.tensor_parallel == 1
        if (kn.layers != "scan" or kn.fuse_projections) and not single:
            raise ValueError("EngineConfig.kernels.layers='unrolled' / fuse_projections=True are single-device "
                             "layouts: set data_parallel=1 and tensor_parallel=1, or keep layers='scan', "
                             "fuse_projections=False")
        if kn.fuse_rope_kv and not single:
            raise ValueError("EngineConfig.kernels.fuse_rope_kv=True is for single-device engines: set data_parallel=1 "
                             "and tensor_parallel=1, or fuse_rope_kv=False")
        if kn.fuse_rope_kv and self.schedule == "mixed":
            raise ValueError("EngineConfig.kernels.fuse_rope_kv=True fuses the split schedule's decode rounds: set "
                             "schedule='split' (or 'auto'), or fuse_rope_kv=False")
        if kv.kv_dtype != "compute" and kn.attention == "mosaic":
            raise ValueError(f"EngineConfig.kv.kv_dtype={kv.kv_dtype!r} needs kernels.attention='pallas', 'reference' "
                             "or 'auto': the Mosaic decode kernel reads bf16/f16 pools only")
        if self.data_parallel > 1:
            self.per_device(self.data_parallel)  # the totals must split into data_parallel groups

    @property
    def pages_per_seq(self) -> int:
        return self.window // self.page_size

    @property
    def prefill_lengths(self) -> tuple[int, ...]:
        """Chunk lengths the split schedule's prefill round is compiled for (ascending; kernels.prefill_buckets)."""
        c, k, s = self.prefill_chunk, self.kernels.prefill_buckets, self.page_size
        if k <= 1:
            return (c,)
        return tuple(sorted({min(c, -(-math.ceil(c * j / k) // s) * s) for j in range(1, k + 1)}))

    @property
    def round_tokens(self) -> int:
        """Tokens per mixed round: token_budget, or max_slots + min(prefill_slots * prefill_chunk, 8192) when 0."""
        return self.token_budget or self.max_slots + min(self.prefill_slots * self.prefill_chunk, AUTO_PREFILL_CAP)

    @property
    def round_sizes(self) -> tuple[int, ...]:
        """Row counts a mixed round is compiled for (ascending): max_slots (decode only), round_tokens,
        round_tokens / 8**k while that stays >= 2 * max_slots (a short prefill does not pay the full budget),
        and up to kernels.small_rounds sizes max_slots / 4**k >= 4 (a round with few live sequences does not pay
        for max_slots rows). Each size is one more compiled forward."""
        sizes, x = {self.max_slots, self.round_tokens}, self.round_tokens
        while x // 8 >= 2 * self.max_slots:
            x //= 8
            sizes.add(x)
        x = self.max_slots
        for _ in range(self.kernels.small_rounds):
            if x // 4 < 4:
                break
            x //= 4
            sizes.add(x)
        return tuple(sorted(sizes))

    @property
    def queue_len(self) -> int:
        return self.queue_size or 2 * self.max_slots

    def resolve(self, backend: str, head_dim: int = 128) -> "EngineConfig":
        """The config that runs on `backend` ("cpu", "gpu", ...) for a model of `head_dim`: `schedule="auto"` decided
        (mixed on CPU, split on GPUs and with kernels.fuse_rope_kv, whose fused kernel is a split round's) and
        `kernels.attention="auto"` decided (pallas on GPUs for page and head sizes the kernel handles, powers of two
        >= 16 as memjax.kernels.paged_attention.pallas_supported; else reference). The Engine runs this config and
        keeps it as `engine.config`; `--check` prints it."""
        out = self
        if self.schedule == "auto":
            mixed = backend == "cpu" and not self.kernels.fuse_rope_kv
            out = dataclasses.replace(out, schedule="mixed" if mixed else "split")
        if self.kernels.attention == "auto":
            pow2 = lambda x: x >= 16 and (x & (x - 1)) == 0
            gpu = backend in ("gpu", "cuda", "rocm") and pow2(self.page_size) and pow2(head_dim)
            out = dataclasses.replace(out, kernels=dataclasses.replace(self.kernels,
                                                                       attention="pallas" if gpu else "reference"))
        return out

    def over_groups(self, d: int) -> EngineConfig:
        """The config of `d` data-parallel device groups each running this one (per_device's inverse: the totals
        multiplied by d, data_parallel = d), so that `over_groups(d).per_device(d)` is this config's group."""
        if not isinstance(d, int) or d < 1 or self.data_parallel != 1:
            raise ValueError(f"EngineConfig.over_groups: d must be an int >= 1 on a one-group config, got d={d!r}, "
                             f"data_parallel={self.data_parallel}")
        if d == 1:
            return self
        kv = self.kv
        mul = lambda v: v * d if v else v
        kv = dataclasses.replace(kv, num_pages=mul(kv.num_pages), kv_cache_bytes=mul(kv.kv_cache_bytes),
                                 kv_cache_gib=None if kv.kv_cache_gib is None else kv.kv_cache_gib * d)
        return dataclasses.replace(self, max_slots=self.max_slots * d, prefill_slots=self.prefill_slots * d, kv=kv,
                                   queue_size=mul(self.queue_size), token_budget=mul(self.token_budget),
                                   data_parallel=d)

    def per_device(self, d: int) -> "EngineConfig":
        """The config of one of `d` device groups: the totals (max_slots, prefill_slots, queue_size, token_budget,
        kv.num_pages; kv.kv_cache_bytes rounded down, kv.kv_cache_gib) divided by d; ValueError naming a total d
        does not divide."""
        if d == 1:
            return self
        kv = self.kv
        for f, v in (("max_slots", self.max_slots), ("prefill_slots", self.prefill_slots),
                     ("kv.num_pages", kv.num_pages), ("queue_size", self.queue_size),
                     ("token_budget", self.token_budget)):
            if v and v % d:
                raise ValueError(f"EngineConfig.{f}={v} is a total over data_parallel={d} device groups and must "
                                 f"be divisible by {d}")
        if kv.num_pages is not None and kv.num_pages // d < self.pages_per_seq + 2:
            raise ValueError(f"EngineConfig.kv.num_pages={kv.num_pages} over {d} device groups leaves "
                             f"{kv.num_pages // d} pages per group < window/page_size + 2 = {self.pages_per_seq + 2}")
        div = lambda v: v // d if v else v
        kv = dataclasses.replace(kv, num_pages=div(kv.num_pages), kv_cache_bytes=div(kv.kv_cache_bytes),
                                 kv_cache_gib=None if kv.kv_cache_gib is None else kv.kv_cache_gib / d)
        return dataclasses.replace(
            self, max_slots=self.max_slots // d, prefill_slots=self.prefill_slots // d, kv=kv,
            queue_size=div(self.queue_size), token_budget=div(self.token_budget), data_parallel=1,
            idle_return=min(self.idle_return, self.max_slots // d))


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 = greedy. top_p in (0, 1], top_k 0 = off. max_tokens new tokens at most.

    logprobs="raw" (default): returned log-probs are log softmax(logits / T) of the sampled token under
    the full vocabulary, before top-p / top-k truncation (T = 1 for greedy). logprobs="processed": under
    the truncated, renormalised distribution actually sampled from (softmax over the top-k / top-p set
    of logits / T; greedy rows ignore truncation, so they return the raw value). The trainer recomputes
    either: memjax.rl.logprobs.token_logprobs(..., logprobs=, top_p=, top_k=).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 256
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    logprobs: str = "raw"  # "raw" | "processed"

    def __post_init__(self) -> None:
        if self.logprobs not in LOGPROB_MODES:
            raise ValueError(f"SamplingParams.logprobs must be one of {LOGPROB_MODES}, got {self.logprobs!r}")
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"SamplingParams.top_k must be >= 0, got {self.top_k}")
        if self.max_tokens <= 0:
            raise ValueError(f"SamplingParams.max_tokens must be > 0, got {self.max_tokens}")
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))


@dataclass(eq=False)
class KVHandle:
    """A finished sequence's cached KV pages, kept for continuations (`Engine.submit(retain=True)`).

    tokens: the whole sequence (prompt + generated); the first n_cached have K/V in `pages` (the newest
    generated token never has). Holds one reference on each page until `Engine.release(handle)` and every
    child queued on it has been admitted (children take their own references).
    """

    pages: tuple[int, ...]
    n_cached: int
    tokens: list[int]
    truncated: int = 0
    holders: int = 0  # children submitted but not yet admitted
    released: bool = False  # Engine.release was called
    device: int = 0  # the device group whose pool holds the pages (data_parallel engines)
    freed: bool = False  # the references were dropped on the device


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" | "length" | "window"
    prompt_len: int = 0
    request_id: int = -1
    preemptions: int = 0
    prompt_truncated: int = 0  # tokens dropped from the prompt's left by overlong_prompt="truncate_left"
    extra: dict = field(default_factory=dict)
    kv: KVHandle | None = None  # retained KV pages (submit(retain=True)) for submit(parent=completion)
