"""CheckpointError: one clear, one-line error about a checkpoint, naming the file and/or tensor."""


class CheckpointError(ValueError):
    pass
