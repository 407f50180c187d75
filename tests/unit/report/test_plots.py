"""Which metrics.jsonl keys the report draws (the key names memjax.train logs: a tiny Memory-R2 run's, which has
the entropy term on) and that a chart is an inline SVG with its series, gaps for None / NaN."""

import math

from memjax.report.plots import curve_svg, panels_for

# the keys of one metrics.jsonl line of `python -m memjax.train configs/memory_r2/tiny.py` (CPU, 2 steps)
R2_KEYS = ["step", "rollout_s", "reward", "groups_with_signal", "trained_samples", "rollout_seconds", "lr",
           "logp_mismatch_mean", "logp_mismatch_max", "clipfrac", "clipfrac_high", "clipfrac_low", "approx_kl",
           "ratio_mean", "entropy", "grad_norm", "loss", "optimizer_steps", "skipped_steps", "pad_fraction",
           "reward_mean", "response_tokens", "update_s", "conversations", "tokens_per_s", "rollout_mfu", "update_mfu",
           "mean_conversation_tokens", "engine_freed_gib"]


def test_panels_from_the_logged_keys():
    panels = dict(panels_for(R2_KEYS))
    assert list(panels) == ["reward", "loss", "KL", "clip fraction", "entropy", "throughput (tokens/s)",
                            "step time (s)"]
    assert panels["reward"] == ["reward", "reward_mean", "groups_with_signal"] and panels["entropy"] == ["entropy"]
    assert panels["KL"] == ["approx_kl", "logp_mismatch_mean"] and panels["step time (s)"] == ["rollout_s", "update_s"]
    assert dict(panels_for(["step", "loss", "value_loss", "kl_loss"]))["loss"] == ["loss", "value_loss", "kl_loss"]
    assert panels_for(["step", "lr", "grad_norm"]) == []                  # nothing invented for other keys


def test_curve_svg_inline_with_gaps():
    svg = curve_svg("a <b> & c", [1, 2, 3, 4], {"x": [0.1, None, math.nan, 0.4], "y": [1, 2, 3, 4]})
    assert svg.startswith('<svg class="curve" data-title="a &lt;b&gt; &amp; c" data-series="2"')
    assert "<?xml" not in svg and 'href="http' not in svg and svg.rstrip().endswith("</svg>")
    assert ">x<" in svg and ">y<" in svg                                  # legend entries as text
