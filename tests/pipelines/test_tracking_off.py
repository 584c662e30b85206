"""With ``tracking.enabled: false`` the report and evaluation nodes load no mlflow (nodes report
through ``bert_kd.experiment.tracker``; only its MLflow implementation imports mlflow)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests import fresh_interpreter


def test_evaluation_comparison_and_export_nodes_with_tracking_off_import_no_mlflow(
    tmp_path, tiny_teacher_dir, tiny_glue_dir
):
    script = textwrap.dedent(f"""
        import os, sys
        os.chdir({str(tmp_path)!r})
        from bert_kd.core.models import load_bundle
        from bert_kd.config.schema import Tracking
        from bert_kd.pipelines.evaluate.nodes import evaluate_model_source
        from bert_kd.pipelines.evaluate_teacher.nodes import evaluate_model
        from bert_kd.pipelines.export_student.nodes import PIPELINE_STUDENT, chosen_student
        off = {{"enabled": False}}
        settings = {{"model": {str(tiny_teacher_dir)!r}, "max_seq_length": 32}}
        evaluation = evaluate_model_source(settings, "rte", {str(tiny_glue_dir)!r}, 10, 0, off)
        bundle = load_bundle({str(tiny_teacher_dir)!r})
        bundle.info["mlflow_run_id"] = "a-run-of-another-store"
        from bert_kd.core.data.glue import load_glue_task
        from bert_kd.core.data.tokenize import tokenize_splits
        tokenized = tokenize_splits(load_glue_task("rte", {str(tiny_glue_dir)!r}, allow_download=False), bundle.tokenizer, 32)
        again = evaluate_model(bundle, tokenized, "rte", off)
        _, source = chosen_student(bundle, None, Tracking(enabled=False), "rte")
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from tests.pipelines.test_comparison_verdict import evaluation as scored
        from bert_kd.pipelines.distill.nodes import compare_methods
        frame, _, _ = compare_methods(scored(None, 0.8), scored("nkd", 0.65), scored("alp", 0.72))  # a report node
        print(evaluation["examples"]["validation"], source == PIPELINE_STUDENT, len(frame), "mlflow" in sys.modules)
    """)
    done = fresh_interpreter.run(script, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-4:] == ["10", "True", "4", "False"]
