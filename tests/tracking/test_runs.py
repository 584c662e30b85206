"""bert_kd.tracking.runs: runs opened and logged to (real temporary SQLite store)."""

from bert_kd.tracking.runs import tracked_run


def test_many_params_are_logged_in_batches(store):
    with tracked_run("many") as run:
        run.log_params({"block": {f"p{i}": i / 3 for i in range(250)}})
    params = store.client.get_run(run.run_id).data.params
    assert len([k for k in params if k.startswith("block.")]) == 250 and params["block.p1"] == "0.333333"
