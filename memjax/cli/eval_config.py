"""The configs of `python -m memjax.evaluate`: EvalConfig (MemAgent accuracy vs document length on
RULER-HotpotQA) and SystemEvalConfig (any registered system's held-out evaluation of a policy).

Owns: those two frozen dataclasses and their validation; nothing runs here. They live apart from the CLI
module so that `python -m memjax.evaluate`, which executes memjax/cli/evaluate.py as `__main__`, dispatches on the
same classes the config files import (`from memjax.cli.eval_config import EvalConfig`); LocomoEvalConfig lives
with the LoCoMo evaluation (memjax/evaluation/locomo.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..checkpoint.source import ModelSource
from ..core.compile_cache import check_compile_cache
from ..engine import EngineConfig
from ..evaluation.profiles import get_profile
from ..systems import AgentSection, TinySection
from ..systems.memagent.workflow import MemAgentConfig


@dataclass(frozen=True)
class EvalConfig:
    model: ModelSource = field(default_factory=ModelSource)
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(max_slots=16, window=8192, page_size=64,
                                                                      prefill_slots=4, prefill_chunk=1024))
    memagent: MemAgentConfig = field(default_factory=lambda: MemAgentConfig(temperature=0.0))
    data_path: str = ""  # raw HotpotQA JSON | directory of official eval_{N}.json | parquet / eval JSON / JSONL file
    docs_path: str = ""  # HotpotQA dev JSON indexed by the official over-1M eval files (contexts as document numbers)
    num_docs: tuple[int, ...] = (50, 100, 200)
    num_samples: int = 16
    seed: int = 0
    baseline: bool = True
    out_dir: str = "out/eval"
    metrics: str = "memagent"  # a boxed metric profile (memjax.evaluation.profiles): memagent | memagent_lenient
    batch_items: int = 0  # questions per resumable batch (traces written after each); 0 = engine.max_slots // group
    rescore: bool = False  # out_dir holds scores of another policy / data / metric profile: score again (else refused)
    # persistent XLA compilation cache (memjax/core/compile_cache.py), as TrainConfig's: "auto" = JAX_COMPILATION_CACHE_DIR
    # if set, else on GPUs ~/.cache/memjax/xla (shared with training runs), none on CPU; "none"; a folder
    compile_cache: str = "auto"

    def __post_init__(self):
        try:
            get_profile(self.metrics, "boxed")
        except ValueError as e:
            raise ValueError(f"EvalConfig.{e}") from None
        if self.num_samples <= 0:
            raise ValueError(f"EvalConfig.num_samples must be > 0, got {self.num_samples}")
        if not self.num_docs or any(n <= 0 for n in self.num_docs):
            raise ValueError(f"EvalConfig.num_docs must list at least one N, each > 0 (got {self.num_docs})")
        if not self.out_dir:
            raise ValueError("EvalConfig.out_dir must not be empty")
        if self.batch_items < 0:
            raise ValueError(f"EvalConfig.batch_items must be >= 0, got {self.batch_items}")
        check_compile_cache("EvalConfig", self.compile_cache)


@dataclass(frozen=True)
class SystemEvalConfig:
    agent: AgentSection = field(default_factory=TinySection)  # the system (agent.name) and its settings
    model: ModelSource = field(default_factory=ModelSource)  # the system's model source (and tokenizer)
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(max_slots=16, window=1024, page_size=16,
                                                                      prefill_slots=4, prefill_chunk=256))
    policy: str = ""  # HF directory of the policy to evaluate (e.g. out/tiny/hf); "" = the initial model
    seed: int = 0
    out_dir: str = "out/eval_system"
    # persistent XLA compilation cache (memjax/core/compile_cache.py), as TrainConfig's: "auto" = JAX_COMPILATION_CACHE_DIR
    # if set, else on GPUs ~/.cache/memjax/xla (shared with training runs), none on CPU; "none"; a folder
    compile_cache: str = "auto"

    def __post_init__(self):
        if not self.out_dir:
            raise ValueError("SystemEvalConfig.out_dir must not be empty")
        check_compile_cache("SystemEvalConfig", self.compile_cache)
