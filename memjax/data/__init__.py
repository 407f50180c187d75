"""Datasets for memory agents: RULER-HotpotQA synthesis, RULER synthetic tasks, SQuAD loading, grain pipelines.

Every sample is synthesised lazily and deterministically from (seed, task, index); contexts are plain text that the
agent workflow tokenises once. See each module's docstring for its invariants.
"""

from .hotpotqa import (
    NO_CONTEXT_PROMPT,
    FilterResult,
    HotpotQACorpus,
    HotpotQuestion,
    RulerHotpotQAConfig,
    RulerHotpotQASample,
    filter_no_context,
    format_context,
    load_hotpotqa,
    synthesize,
)
from .length import Fit, fit_units
from .ruler import (
    TASKS,
    CWESpec,
    FWESpec,
    NIAHSpec,
    QASpec,
    RulerConfig,
    RulerGenerator,
    RulerSample,
    TaskSpec,
    VTSpec,
    metric_for,
    without_essay,
)
from .sources import HotpotQASource, PipelineStream, RulerSource, make_dataloader, make_pipeline
from .squad import SquadCorpus, SquadQuestion, load_squad

__all__ = [
    "NO_CONTEXT_PROMPT", "FilterResult", "HotpotQACorpus", "HotpotQuestion", "RulerHotpotQAConfig",
    "RulerHotpotQASample", "filter_no_context", "format_context", "load_hotpotqa", "synthesize",
    "Fit", "fit_units",
    "TASKS", "CWESpec", "FWESpec", "NIAHSpec", "QASpec", "RulerConfig", "RulerGenerator", "RulerSample", "TaskSpec",
    "VTSpec", "metric_for", "without_essay",
    "HotpotQASource", "PipelineStream", "RulerSource", "make_dataloader", "make_pipeline",
    "SquadCorpus", "SquadQuestion", "load_squad",
]
