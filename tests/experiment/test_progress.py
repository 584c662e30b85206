"""bert_kd.experiment.progress: the overall progress line of a run of several training jobs."""

from bert_kd.experiment.progress import JobProgress, duration_text


def test_the_time_left_comes_from_the_finished_jobs_of_each_kind():
    progress = JobProgress(["teacher", "student", "student", "student"])
    assert progress.line(load=0.5, cores=2) == "job 1 of 4, time left known after the first job"
    progress.done("teacher", 120.0)
    # no student measured yet: each pending student is taken at the mean of every finished job
    assert progress.seconds_left() == 3 * 120.0
    progress.done("student", 30.0)
    assert progress.seconds_left() == 2 * 30.0
    assert progress.line(load=3.14, cores=2) == "job 3 of 4, ~60 s left, machine busy: load 3.1 on 2 cores"
    assert progress.line(load=1.0, cores=2) == "job 3 of 4, ~60 s left"


def test_durations_read_as_seconds_minutes_or_hours():
    assert [duration_text(s) for s in (0.2, 40, 240, 5400, 36000)] == ["~1 s", "~40 s", "~4 min", "~1.5 h", "~10.0 h"]
