"""`python -m memjax.train`: the command's name; the command is memjax/cli/train.py. `from memjax.train import Run,
TrainConfig, train` (what config files and scripts import) resolves each name on first use."""
from .cli.train import main
from .core.lazy import exports, names

__getattr__, __dir__ = exports(globals(), {**names(".loop.run", "Run", "train"),
                                          **names(".run.train_config", "ABLATIONS", "TrainConfig")})

if __name__ == "__main__":
    raise SystemExit(main())
