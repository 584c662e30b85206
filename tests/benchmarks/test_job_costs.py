"""benchmarks/job_costs.py: the committed costs are the geometric means of the recorded timelines' costs."""

from __future__ import annotations

import importlib.util

from tests.conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("job_costs_benchmark", REPO_ROOT / "benchmarks" / "job_costs.py")
job_costs_benchmark = importlib.util.module_from_spec(spec)
spec.loader.exec_module(job_costs_benchmark)

TIMELINES = sorted((REPO_ROOT / "tests" / "experiment" / "fixtures" / "eta_timelines").glob("*.json"))
#: The README's main job, reconstructed from its record: the committed record replays it (``--replay``).
REPLAYS = [
    REPO_ROOT / "tests" / "experiment" / "fixtures" / "eta_timelines" / "main_job" / f"{name}_reconstructed.json"
    for name in ("trained_teacher", "reused_teacher")
]


def test_each_row_s_mean_is_the_committed_cost(tmp_path):
    out = tmp_path / "job_costs.md"
    assert job_costs_benchmark.main([*map(str, TIMELINES), "--replay", *map(str, REPLAYS), "--out", str(out)]) == 0
    costs = out.read_text().split("\n\n")[1]  # the first table: the costs
    rows = [line.split("|")[1:-1] for line in costs.splitlines() if line.startswith("| ") and "---" not in line]
    by_key = {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows[1:]}
    assert float(by_key["alp"][-2]) == float(by_key["alp"][-1]) > float(by_key["nkd"][-1])
    assert all(float(cells[-2]) == float(cells[-1]) for cells in by_key.values())
    assert out.read_text() == (REPO_ROOT / "benchmarks" / "results" / "job_costs.md").read_text()
    assert "| 13 | alp_kd.tinybert_one_stage.distill | 251 s | 247 s | -2% |" in out.read_text()  # the quiet run
