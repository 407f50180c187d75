"""tests/scripted_engine.py's `engine_replaced`: the real memjax.engine.Engine is back after the block, also in a module
first imported inside it (a CLI's module that binds `Engine` at import), so a later test of the process gets real
engines (a scripted engine left behind made the next evaluation of the process fail)."""

import sys

from scripted_engine import engine_replaced


def test_the_real_engine_is_back_where_a_module_imported_inside_the_block_bound_the_factory(tmp_path, monkeypatch):
    import memjax.engine

    real = memjax.engine.Engine
    (tmp_path / "binds_engine_at_import.py").write_text("from memjax.engine import Engine\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "binds_engine_at_import", raising=False)

    def factory(model, cfg):
        raise AssertionError("not called")

    with engine_replaced(factory):
        import binds_engine_at_import

        assert memjax.engine.Engine is factory and binds_engine_at_import.Engine is factory
    assert memjax.engine.Engine is real and binds_engine_at_import.Engine is real
