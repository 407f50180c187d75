"""MemAgent's studies (memjax/systems/memagent/, configs/memagent/): length extrapolation of the tiny task, the
paper's per-length table on CPU, the measured and the analytic cost of chunked reading against full context as the
document grows (`linearity.py`, `flops_linearity.py`), and the token lengths of RULER-HotpotQA contexts.
Run as `python -m benchmarks.memagent.<name>`; they import shared benchmarks and memjax, never another paper's."""
