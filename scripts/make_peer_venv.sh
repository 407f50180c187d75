#!/usr/bin/env bash
# Make the virtual environment of one peer framework for benchmarks/peers/ (generation.py, grpo.py), from PyPI only:
#   scripts/make_peer_venv.sh tunix      -> .venv-peers/tunix (google-tunix 0.1.7 with its own jax, CPU wheels)
#   scripts/make_peer_venv.sh trl        -> .venv-peers/trl (trl, transformers, torch)
#   scripts/make_peer_venv.sh easydel    -> .venv-peers/easydel (easydel[torch] 0.3.0, its jax pin, torch 2.8)
# PEER_PYTHON picks the interpreter (default: scripts/find_python.sh). PyPI's Linux torch wheel brings CUDA
# libraries (several GB); where pip can find a CPU-only torch wheel (a --find-links folder), give the Python that
# wheel is built for, e.g. PEER_PYTHON=python3.11.
# Each peer gets its own environment because its pins (jax 0.12 for tunix, flax 0.12.3 / transformers 5.5 for
# easydel) differ from memjax's (jax 0.11.2).
# On a GPU machine pass JAX_EXTRA=cuda12 to install jax[cuda12] instead of jax[cpu].
set -euo pipefail
cd "$(dirname "$0")/.."
peer="${1:?usage: scripts/make_peer_venv.sh tunix}"
case "$peer" in
  tunix) pkgs=("google-tunix==0.1.7" "jax[${JAX_EXTRA:-cpu}]"); check="import jax, importlib.metadata as m; print('tunix', m.version('google-tunix'), 'jax', jax.__version__)" ;;
  # easydel: the [torch] extra (its documented path for Hugging Face checkpoints, from_torch; torch 2.8.0) and
  # pillow, which easydel 0.3.0 imports (easydel.modules.auto -> esurge.multimodal) without declaring it
  easydel) pkgs=("easydel[torch]==0.3.0" "pillow" "jax[${JAX_EXTRA:-cpu}]"); check="import jax, easydel, importlib.metadata as m; from easydel import AutoEasyDeLModelForCausalLM, eSurge; print('easydel', m.version('easydel'), 'jax', jax.__version__, 'flax', m.version('flax'), 'torch', m.version('torch'))" ;;
  trl) pkgs=("torch" "transformers" "trl"); check="import torch, transformers, trl; print('trl', trl.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)" ;;
  *) echo "make_peer_venv: unknown peer '$peer' (known: tunix, trl, easydel)" >&2; exit 2 ;;
esac
base=${PEER_PYTHON:-$(scripts/find_python.sh)}
dir=".venv-peers/$peer"
[ -x "$dir/bin/python" ] || "$base" -m venv "$dir"
"$dir/bin/python" -m pip install -q --upgrade pip
"$dir/bin/python" -m pip install -q "${pkgs[@]}"
"$dir/bin/python" -c "$check"
