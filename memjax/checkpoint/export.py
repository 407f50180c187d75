"""A servable Hugging Face model directory: the weights and config of `save_hf`, plus everything a consumer
(transformers' AutoTokenizer / AutoModelForCausalLM, vLLM's loader) and a reader need beside them.

Owns `export_hf(model, out_dir, tokenizer=..., run=...)`, which writes config.json + safetensors (save_hf), the
tokenizer files (a Qwen `Tokenizer`'s own directory's files or the shipped Qwen2.5 tokenizer's; for a tiny system's
word tokenizer a `tokenizers` WordLevel tokenizer.json with the tiny ids and a `<role> content <end>` chat
template, marked `"memjax_tokenizer": "tiny-words"`), generation_config.json (the run's sampling defaults, eos and
pad ids), README.md (the model card: system, recipe, data, results before / after, code version, the base model's
licence) and memjax.json (system name and agent section, for `python -m memjax.run_agent`).
Invariants: every process calls it (save_hf gathers) and only process 0 writes; the extra files are written after
the weights, so a directory with README.md is complete. `run` is result.json's dict (memjax/loop/result.py), or
None for a bare conversion (then the card names only the model and tokenizer).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import CheckpointError
from .hf import DEFAULT_MAX_SHARD_BYTES, save_hf

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
                   "chat_template.jinja", "added_tokens.json")
TINY_MARK = "tiny-words"
TINY_TEMPLATE = ("{% for message in messages %}{{ '<' + message['role'] + '> ' + message['content'] + ' <end> ' }}"
                 "{% endfor %}{% if add_generation_prompt %}{{ '<assistant>' }}{% endif %}")
PAPERS = {
    "memagent": ("MemAgent: Reshaping Long-Context LLM with Multi-Conv RL-based Memory Agent", "arXiv:2507.02259"),
    "sumer": ("SUMER: search-based memory agent trained with RL over raw conversations", ""),
    "memory_r1": ("Memory-R1: Enhancing Large Language Model Agents to Manage and Utilize Memories via RL",
                  "arXiv:2508.19828"),
    "memory_r2": ("Memory-R2: a shared extractor / manager policy trained with LoGo-GRPO", ""),
}


def _shipped_tokenizer_dir() -> Path:
    return Path(str(resources.files("memjax") / "assets" / "qwen2.5-tokenizer"))


def _tiny_tokenizer_files(words: tuple[str, ...]) -> dict[str, str]:
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=None))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    specials = [w for w in words if w.startswith("<") and w.endswith(">")]
    tk.add_special_tokens([AddedToken(w, special=True, normalized=False) for w in specials])
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "memjax_tokenizer": TINY_MARK, "chat_template": TINY_TEMPLATE,
           "eos_token": "<end>", "pad_token": "<pad>", "bos_token": None, "unk_token": None,
           "clean_up_tokenization_spaces": False, "model_max_length": 1_000_000}
    return {"tokenizer.json": tk.to_str(), "tokenizer_config.json": json.dumps(cfg, indent=2)}


def tokenizer_source(tokenizer) -> Path | None:
    """The directory a memjax Tokenizer was read from (the shipped one for Tokenizer.default()); None for a tiny one."""
    if hasattr(tokenizer, "words"):
        return None
    src = Path(getattr(tokenizer, "source", ""))
    if src.is_dir() and (src / "tokenizer.json").is_file():
        return src
    return _shipped_tokenizer_dir()


def write_tokenizer(tokenizer, out: Path) -> list[str]:
    """The tokenizer's files into `out` (module docstring); returns their names."""
    if hasattr(tokenizer, "words"):
        files = _tiny_tokenizer_files(tuple(tokenizer.words))
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
        return sorted(files)
    src = tokenizer_source(tokenizer)
    names = [n for n in TOKENIZER_FILES if (src / n).is_file()]
    if "tokenizer.json" not in names:
        raise CheckpointError(f"{src}: no tokenizer.json to export")
    for n in names:
        if (src / n).resolve() != (out / n).resolve():
            shutil.copyfile(src / n, out / n)
    return names


def _token_ids(tokenizer) -> tuple[int | None, int | None]:
    if hasattr(tokenizer, "words"):  # a tiny task's vocabulary: its end-of-turn id (eos_id, else its first stop id)
        stops = getattr(tokenizer, "stop_ids", ())
        return getattr(tokenizer, "eos_id", stops[0] if stops else None), getattr(tokenizer, "pad_id", None)
    named = getattr(tokenizer, "_named", {})
    return named.get("eos_token"), named.get("pad_token")


def generation_config(tokenizer, *, temperature: float = 0.0, top_p: float = 1.0) -> dict:
    """generation_config.json: greedy when temperature is 0, else sampling at the recipe's temperature / top_p."""
    eos, pad = _token_ids(tokenizer)
    out: dict[str, Any] = {"do_sample": temperature > 0}
    if temperature > 0:
        out.update(temperature=float(temperature), top_p=float(top_p), top_k=0)
    if eos is not None:
        ends = [eos] + [i for i in (getattr(tokenizer, "endoftext_id", None),) if i is not None and i != eos]
        out["eos_token_id"] = ends if len(ends) > 1 else eos
    if pad is not None:
        out["pad_token_id"] = pad
    return out


def _front_matter_licence(readme: Path) -> str | None:
    try:
        text = readme.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.match(r"---\s*\n(.*?)\n---", text, re.S)
    hit = m and re.search(r"^license:\s*(\S+)", m.group(1), re.M)
    return hit.group(1).strip("'\"") if hit else None


def base_licence(base: str | None, tokenizer) -> str:
    """The licence of the weights the run started from: the base dir's README front matter, its LICENSE's first line,
    else what is known of memjax's own starting points (random presets, the tiny systems' shipped policies)."""
    if base:
        root = Path(base)
        lic = _front_matter_licence(root / "README.md")
        if lic:
            return lic
        for name in ("LICENSE", "LICENSE.txt", "LICENSE.md"):
            if (root / name).is_file():
                first = next((ln.strip() for ln in (root / name).read_text(errors="replace").splitlines()
                              if ln.strip()), "")
                return f"see LICENSE ({first})" if first else "see LICENSE"
        return "unknown (the base directory names none)"
    if hasattr(tokenizer, "words"):
        return "apache-2.0 (memjax's tiny warm start, trained by memjax)"
    return "apache-2.0 (random initial weights; the Qwen2.5 tokenizer is Apache-2.0)"


def _paper(system: str) -> tuple[str, str]:
    for key in sorted(PAPERS, key=len, reverse=True):
        if key in system:
            return PAPERS[key]
    return PAPERS["memagent"]


def _data_lines(agent: dict) -> list[str]:
    out = []

    def walk(d: Any, prefix: str) -> None:
        if isinstance(d, dict):
            for k, v in d.items():
                walk(v, f"{prefix}{k}.")
        elif isinstance(d, str) and d and ("path" in prefix or "data" in prefix or "file" in prefix):
            out.append(f"- `agent.{prefix[:-1]}` = `{d}`")

    walk(agent, "")
    return out


def model_card(run: dict | None, *, tokenizer, base: str | None, files: list[str]) -> str:
    """README.md: YAML front matter (licence, base model, library) and the run's facts (module docstring)."""
    cfg = (run or {}).get("config", {})
    system = (run or {}).get("system") or cfg.get("agent", {}).get("name", "")
    licence = base_licence(base, tokenizer)
    lic_id = licence.split()[0] if licence and not licence.startswith(("see", "unknown")) else "other"
    meta = ["---", f"license: {lic_id}", "library_name: transformers", "pipeline_tag: text-generation",
            "tags:", "- memjax", "- memory-agent", "- reinforcement-learning"]
    if base:
        meta.append(f"base_model: {Path(base).name}")
    meta.append("---")
    title = f"memjax {system} policy" if system else "memjax policy"
    lines = [*meta, "", f"# {title}", ""]
    if run is None:
        lines += ["Converted with `python -m memjax.convert`; no training run is recorded with it.", ""]
    else:
        paper, ref = _paper(system)
        history = run.get("history") or []
        steps = history[-1]["step"] if history else 0
        lines += [f"- system: `{system}`", f"- paper: {paper}{f' ({ref})' if ref else ''}",
                  f"- steps trained: {steps} of {cfg.get('steps', '?')}",
                  f"- advantage: `{cfg.get('advantage', {}).get('estimator', '?')}`, "
                  f"lr {cfg.get('optim', {}).get('lr', '?')}, prompts per step {cfg.get('prompts_per_step', '?')}",
                  f"- code version: `{run.get('code', '?')}`", ""]
        data = _data_lines(cfg.get("agent", {}))
        lines += ["## Data", "", *(data or ["- the system's generated task (no data files)"]), ""]
        before, after = run.get("before") or {}, run.get("after") or {}
        keys = [k for k in after if k != "step" and isinstance(after.get(k), (int, float))]
        lines += ["## Held-out results", ""]
        if keys:
            lines += [f"| metric | before (step {before.get('step', '?')}) | after (step {after.get('step', '?')}) |",
                      "|---|---|---|"]
            lines += [f"| {k} | {_fmt(before.get(k))} | {_fmt(after.get(k))} |" for k in keys]
        else:
            lines.append("No held-out evaluation was recorded.")
        lines += ["", "## Recipe config", "", "```json", json.dumps(cfg, indent=1, default=str), "```", ""]
    lines += ["## Files", "", *[f"- `{f}`" for f in files], "", "## Licence", "", f"Base weights: {licence}.", ""]
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _sampling(run: dict | None) -> tuple[float, float]:
    agent = (run or {}).get("config", {}).get("agent", {})
    for sec in (agent, *[v for v in agent.values() if isinstance(v, dict)]):
        if "temperature" in sec:
            return float(sec["temperature"]), float(sec.get("top_p", 1.0))
    return 0.0, 1.0


def export_hf(model, out_dir: str | os.PathLike, *, tokenizer, run: dict | None = None, base: str | None = None,
              max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES) -> Path:
    """A complete Hugging Face model directory (module docstring); returns out_dir. `base`: the directory the
    run's weights came from (its licence goes into the card); default: the run config's model.hf_path."""
    import jax

    out = save_hf(model, out_dir, max_shard_bytes=max_shard_bytes)
    if jax.process_index() != 0:
        return out
    if base is None:
        base = (run or {}).get("config", {}).get("model", {}).get("hf_path") or None
    names = write_tokenizer(tokenizer, out)
    temperature, top_p = _sampling(run)
    (out / "generation_config.json").write_text(json.dumps(generation_config(tokenizer, temperature=temperature,
                                                                             top_p=top_p), indent=2) + "\n")
    if run is not None:
        info = {"system": run.get("system"), "agent": run.get("config", {}).get("agent", {}), "code": run.get("code")}
        (out / "memjax.json").write_text(json.dumps(info, indent=1, default=str) + "\n")
    files = sorted(p.name for p in out.iterdir() if p.is_file()) + ["README.md"]
    (out / "README.md").write_text(model_card(run, tokenizer=tokenizer, base=base, files=sorted(set(files + names))))
    return out
