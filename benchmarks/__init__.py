"""memjax benchmarks: throughput, MFU and FLOP-linearity scripts, each runnable as
`python -m benchmarks.<name>`. Results (JSON / markdown / PNG) go to `benchmarks/results/`, each GPU
figure named with the device it was measured on. Benchmarks are measurements, not tests."""
