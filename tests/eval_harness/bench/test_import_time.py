"""eval_harness.bench.import_time: the import-time benchmark measures the light import and checks its baseline."""

from __future__ import annotations

import pytest

from eval_harness.bench import import_time


def test_import_time_bench_reports_the_light_import_and_checks_its_baseline(tmp_path):
    wall, (modules, heavy) = import_time.run_side("import")
    assert wall > 0 and heavy == [] and modules < 1000
    with pytest.raises(ValueError, match="holds no numadapter/__init__.py"):
        import_time.measure(1, baseline=tmp_path)
