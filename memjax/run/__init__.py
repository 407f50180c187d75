"""memjax.run: what only a training run uses beside its loop (memjax/loop): the TrainConfig, the pre-flight
checks, the run's identity on disk (resume and extension rules), the curriculum and the memory plan."""
