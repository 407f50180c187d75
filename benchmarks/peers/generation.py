"""memjax next to a peer framework on the same weights, prompts, batch and machine, in one run: greedy parity and
generation throughput (benchmarks/results/peers_<peer>_<backend>.json).

Peers: tunix (google-tunix 0.1.7, its `Sampler`: static KV cache, jitted prefill + while_loop decode); trl (TRL's
generation path without vLLM: Hugging Face transformers `generate`, PyTorch on CPU); easydel (EasyDeL 0.3.0, its
eSurge engine: continuous batching over a paged KV cache, settings in the results' peer_info). Each peer runs
in its own virtual environment (scripts/make_peer_venv.sh PEER -> .venv-peers/PEER) as a worker process
(benchmarks/peers/workers/) that loads the Hugging Face checkpoint memjax.save_hf wrote with the peer's own loader;
the worker gets the checkpoint, the longest sequence and the largest batch of the run. TRL's GRPO step (item 4 of
issue 37) is not measured here.

Model: a Qwen2-architecture model with random weights (hidden 256, 4 layers, 4 / 2 heads, tied embedding, the real
151,936-token vocabulary), every weight matrix scaled by --init-scale (10: without it the logits of a freshly
initialised model are nearly flat, greedy decoding repeats one token, and parity would be trivial), fp32.
1. Parity: batch 8, 32 prompt tokens, 64 greedy tokens: sequences equal in full or the first divergence; the peer's
   log-probs of memjax's sequences (full forward) against memjax's full forward, max |difference|.
2. Throughput: batch 1, 8, 32, 64; 64 prompt tokens, 128 greedy tokens, no stop token (every sequence runs to the
   end, identical work); one warm-up call each (compilation excluded), then --repeats rounds in which memjax and the
   peer alternate (interleaved, so machine noise hits both); tokens/s = batch x new tokens / seconds of one call
   (memjax: Engine.generate; peer: its sampler call inside the worker, ids in and out). Reported: min and median
   seconds, tokens/s at the min, and memjax / peer.
3. Skewed lengths (--skew-batch, default 64): the same 64-token prompts, but each request needs its own number of
   new tokens (max_tokens: a quarter of the requests --new x 2, the rest --new / 8, shuffled; a stand-in for
   answers that stop early). memjax serves them with continuous batching (Engine.generate with per-request
   SamplingParams: a finished sequence leaves the batch); tunix's sampler and transformers' generate take one
   max_generation_steps per call, so their own batching runs every row to the longest request; EasyDeL's eSurge
   (worker ready line "per_request_max_tokens") gets each request's own max_tokens and batches continuously too.
   Tokens/s counts the useful tokens only (sum of max_tokens), the same for both; interleaved repeats as in 2.
Run: `python -m benchmarks.peers.generation --peer tunix` (after `scripts/make_peer_venv.sh tunix`; likewise `--peer trl`,
`--peer easydel`); `--quick` for a CI-sized run (batches 1 and 4, 16 new tokens, 1 repeat).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from memjax import save_hf
from memjax.engine import Engine, EngineConfig, KVCacheOptions, SamplingParams
from memjax.model import init_model
from memjax.model.config import ModelConfig

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
PEERS = {"tunix": "tunix_worker.py", "trl": "trl_worker.py", "easydel": "easydel_worker.py"}
MODEL = dict(vocab_size=151_936, hidden_size=256, intermediate_size=1024, num_layers=4, num_heads=4, num_kv_heads=2,
             tie_word_embeddings=True, max_position_embeddings=4096)


def make_model(scale: float, seed: int = 0):
    graphdef, state = nnx.split(init_model(ModelConfig(**MODEL), seed))
    return nnx.merge(graphdef, jax.tree.map(lambda x: x * scale if x.ndim >= 2 else x, state))


class Worker:
    """The peer's worker process: one JSON request per line in, one reply per line out."""

    def __init__(self, python: str, peer: str, ckpt: Path, cache_size: int, max_batch: int):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JAX_COMPILATION_CACHE_DIR")}
        self.proc = subprocess.Popen([python, str(ROOT / "benchmarks" / "peers" / "workers" / PEERS[peer]), str(ckpt),
                                      str(cache_size), str(max_batch)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        self.info = self._read()
        if "error" in self.info:  # the peer could not start its engine: its exact error
            raise RuntimeError(f"peer worker: {self.info['error']}")

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"peer worker exited with {self.proc.wait()} (its stderr is above)")
        return json.loads(line)

    def ask(self, **req) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        out = self._read()
        if "error" in out:
            raise RuntimeError(f"peer worker: {out['error']}")
        return out

    def close(self):
        if self.proc.poll() is None:
            self.ask_quit()

    def ask_quit(self):
        self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=60)


def _prompts(n: int, length: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(1, MODEL["vocab_size"] - 1, (n, length)).tolist()  # never the peer's pad id (vocab - 1)


def _engine(model, batch: int, prompt_len: int, new: int) -> Engine:
    window = prompt_len + new  # a pool that holds every sequence's whole window (the peer's static cache does)
    return Engine(model, EngineConfig(max_slots=batch, page_size=16, window=window, prefill_slots=min(batch, 8),
                                      prefill_chunk=prompt_len, progress=False,
                                      kv=KVCacheOptions(num_pages=batch * -(-window // 16) + 2)))


def full_forward_logprobs(model, seqs: list[list[int]]) -> np.ndarray:
    toks = jnp.asarray(seqs, jnp.int32)
    lp = jax.nn.log_softmax(jax.jit(lambda m, x: m(x))(model, toks).astype(jnp.float32), -1)
    return np.asarray(jnp.take_along_axis(lp[:, :-1], toks[:, 1:, None], -1)[..., 0], np.float64)


def parity(model, worker: Worker, batch: int, prompt_len: int, new: int) -> dict:
    prompts = _prompts(batch, prompt_len, seed=1)
    ours = _engine(model, batch, prompt_len, new).generate(prompts, SamplingParams(temperature=0.0, max_tokens=new))
    theirs = worker.ask(cmd="generate", prompts=prompts, max_new=new, prompt_len=prompt_len)["tokens"]
    rows = []
    for o, t in zip(ours, theirs):
        div = next((i for i, (a, b) in enumerate(zip(o.token_ids, t)) if a != b), None)
        rows.append({"equal": o.token_ids == list(t) and div is None, "first_divergence": div,
                     "distinct_tokens": len(set(o.token_ids))})
    seqs = [p + o.token_ids for p, o in zip(prompts, ours)]
    peer_lp = np.asarray(worker.ask(cmd="score", seqs=seqs)["logprobs"])
    our_lp = full_forward_logprobs(model, seqs)
    engine_lp = np.asarray([o.logprobs for o in ours])
    return {"batch": batch, "prompt_len": prompt_len, "new_tokens": new,
            "sequences_equal": sum(r["equal"] for r in rows), "sequences": len(rows), "rows": rows,
            "max_abs_logprob_diff_full_forward": float(np.abs(peer_lp - our_lp).max()),
            "max_abs_logprob_diff_engine_vs_peer_forward": float(np.abs(engine_lp - peer_lp[:, prompt_len - 1:]).max()),
            # yardstick: memjax's own engine against memjax's own full forward (different kernels, same maths)
            "max_abs_logprob_diff_engine_vs_own_forward": float(np.abs(engine_lp - our_lp[:, prompt_len - 1:]).max()),
            "max_abs_logit_scale": float(np.abs(our_lp).max())}


def throughput(model, worker: Worker, batches: list[int], prompt_len: int, new: int, repeats: int) -> list[dict]:
    out = []
    for b in batches:
        prompts = _prompts(b, prompt_len, seed=2 + b)
        eng = _engine(model, b, prompt_len, new)
        sp = SamplingParams(temperature=0.0, max_tokens=new)

        def ours():
            t = time.perf_counter()
            eng.generate(prompts, sp)
            return time.perf_counter() - t

        def theirs():
            return worker.ask(cmd="generate", prompts=prompts, max_new=new, prompt_len=prompt_len)["seconds"]

        ours(), theirs()  # warm-up: compilation
        t_ours, t_theirs = [], []
        for _ in range(repeats):
            t_ours.append(ours())
            t_theirs.append(theirs())
        tok = b * new
        row = {"batch": b, "memjax_s": t_ours, "peer_s": t_theirs,
               "memjax_tok_s": tok / min(t_ours), "peer_tok_s": tok / min(t_theirs),
               "memjax_median_s": statistics.median(t_ours), "peer_median_s": statistics.median(t_theirs)}
        row["ratio"] = row["memjax_tok_s"] / row["peer_tok_s"]
        out.append(row)
        print(f"batch {b:3d}: memjax {row['memjax_tok_s']:8.0f} tok/s  peer {row['peer_tok_s']:8.0f} tok/s  "
              f"memjax/peer {row['ratio']:.2f}", flush=True)
        del eng
    return out


def skew_lengths(batch: int, new: int, seed: int = 7) -> list[int]:
    """Per-request max_tokens of the skewed workload: a quarter of the rows 2 x new, the rest new // 8."""
    long = max(1, batch // 4)
    lens = [2 * new] * long + [max(1, new // 8)] * (batch - long)
    np.random.default_rng(seed).shuffle(lens)
    return lens


def skewed(model, worker: Worker, batch: int, prompt_len: int, new: int, repeats: int) -> dict:
    prompts = _prompts(batch, prompt_len, seed=99)
    lens = skew_lengths(batch, new)
    eng = _engine(model, batch, prompt_len, max(lens))
    sps = [SamplingParams(temperature=0.0, max_tokens=n) for n in lens]

    def ours():
        t = time.perf_counter()
        out = eng.generate(prompts, sps)
        assert [len(o.token_ids) for o in out] == lens
        return time.perf_counter() - t

    own = worker.info.get("per_request_max_tokens", False)  # the peer batches continuously itself (EasyDeL)

    def theirs():  # the peer's own batching: per-request max_tokens, or one call with every row to the longest
        out = worker.ask(cmd="generate", prompts=prompts, max_new=lens if own else max(lens), prompt_len=prompt_len)
        assert not own or [len(t) for t in out["tokens"]] == lens
        return out["seconds"]

    ours(), theirs()
    t_ours, t_theirs = [], []
    for _ in range(repeats):
        t_ours.append(ours())
        t_theirs.append(theirs())
    useful = sum(lens)
    row = {"batch": batch, "max_tokens": {str(n): lens.count(n) for n in sorted(set(lens))}, "useful_tokens": useful,
           "peer_generated_tokens": useful if own else batch * max(lens), "memjax_s": t_ours, "peer_s": t_theirs,
           "memjax_tok_s": useful / min(t_ours), "peer_tok_s": useful / min(t_theirs),
           "memjax": "continuous batching: a finished request frees its slot (Engine.generate, per-request max_tokens)",
           "peer": "its own continuous batching: one request per prompt with its own max_tokens" if own else
           "static batch: one sampler call with max_generation_steps = the longest request"}
    row["ratio"] = row["memjax_tok_s"] / row["peer_tok_s"]
    print(f"skewed batch {batch}: memjax {row['memjax_tok_s']:8.0f} useful tok/s  peer {row['peer_tok_s']:8.0f}  "
          f"memjax/peer {row['ratio']:.2f}", flush=True)
    return row


def run(args) -> dict:
    model = make_model(args.init_scale)
    python = args.python or str(ROOT / ".venv-peers" / args.peer / "bin" / "python")
    if not Path(python).exists():
        raise SystemExit(f"benchmarks.peers.generation: no environment for {args.peer} at {python}; make it with "
                         f"scripts/make_peer_venv.sh {args.peer}")
    with tempfile.TemporaryDirectory(prefix="memjax-peers-") as tmp:
        save_hf(model, tmp)
        cache = max(args.prompt_len + 2 * args.new, args.parity_prompt_len + args.parity_new)
        worker = Worker(python, args.peer, Path(tmp), cache,
                        max([*args.batches, args.parity_batch, args.skew_batch]))
        try:
            par = parity(model, worker, args.parity_batch, args.parity_prompt_len, args.parity_new)
            print(f"parity: {par['sequences_equal']}/{par['sequences']} greedy sequences equal; max |log-prob diff| "
                  f"{par['max_abs_logprob_diff_full_forward']:.2e} (full forwards)", flush=True)
            thr = throughput(model, worker, args.batches, args.prompt_len, args.new, args.repeats)
            skw = skewed(model, worker, args.skew_batch, args.prompt_len, args.new, args.repeats) \
                if args.skew_batch else None
        finally:
            worker.close()
    return {"benchmark": "peers", "peer": args.peer, "peer_info": worker.info, "memjax_jax": jax.__version__,
            "backend": jax.default_backend(), "device_kind": jax.devices()[0].device_kind, "model": MODEL,
            "init_scale": args.init_scale, "dtype": "float32", "engine": "EngineConfig defaults; page 16, max_slots = batch, pool = batch windows",
            "parity": par, "throughput": {"prompt_len": args.prompt_len, "new_tokens": args.new,
                                          "repeats": args.repeats, "rows": thr},
            "skewed": skw}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", required=True, choices=sorted(PEERS))
    ap.add_argument("--python", default="", help="the peer environment's python (default .venv-peers/PEER)")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parity-batch", type=int, default=8)
    ap.add_argument("--parity-prompt-len", type=int, default=32)
    ap.add_argument("--parity-new", type=int, default=64)
    ap.add_argument("--skew-batch", type=int, default=64, help="batch of the skewed-length workload (0: skip it)")
    ap.add_argument("--init-scale", type=float, default=10.0)
    ap.add_argument("--quick", action="store_true", help="CI size: batches 1 4, 16 new tokens, 1 repeat")
    ap.add_argument("--out", type=Path, default=None, help="JSON path (default results/peers_<peer>_<backend>.json)")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches, args.new, args.repeats, args.parity_new, args.skew_batch = [1, 4], 16, 1, 16, 8
    for f in ("prompt_len", "new", "repeats", "parity_batch", "parity_prompt_len", "parity_new"):
        if getattr(args, f) <= 0:
            ap.error(f"--{f.replace('_', '-')} must be > 0")
    if args.skew_batch < 0:
        ap.error("--skew-batch must be >= 0")
    if min(args.batches) <= 0:
        ap.error("--batches must be > 0")
    res = run(args)
    out = args.out or RESULTS / f"peers_{args.peer}_{res['backend']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {out}")
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
