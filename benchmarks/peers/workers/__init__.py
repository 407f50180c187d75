"""Peer-framework workers for benchmarks/peers/ (generation.py, grpo.py): each runs inside its peer's own virtual environment
(scripts/make_peer_venv.sh) and never imports memjax; it speaks JSON lines on stdin/stdout."""
