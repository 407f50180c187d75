"""What every stage of memjax shares, below the model: the config machinery (`config`: frozen dataclasses, `--set`,
`--help`'s field list), a program's command line and exit codes (`cli`), seed derivation (`seeds`), lazy package
exports (`lazy`), output-directory safety (`outdir`), the persistent compile cache (`compile_cache`) and the
tokenizer (`tokenizer`).

Invariants: this package imports nothing at import time, and its modules import no other part of memjax, so any
stage may use them (tests/unit/test_layering.py, stage 0).
"""
