"""memjax benchmarks, by purpose (docs/architecture.md, "Benchmarks"). At this level: the shared machinery's
throughput and memory measurements (engine, kernels, trainer, plan, multi-host, retrieval, the GPU pass and the
deviceless GPU compiles), each runnable as `python -m benchmarks.<name>`. `peers/`: memjax beside other frameworks.
`<paper>/` (memagent, sumer, memory_r1, memory_r2): that paper's studies, `python -m benchmarks.<paper>.<name>`.
Results (JSON / markdown / PNG) go to `benchmarks/results/`, each GPU figure named with the device it was measured
on. Benchmarks are measurements, not tests; a paper's folder imports the shared ones, never another paper's.
"""
