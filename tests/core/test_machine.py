"""bert_kd.core.machine: a busy machine is one with more load than cores, and says so."""

from bert_kd.core.machine import busy_note, is_busy, machine_load


def test_a_load_above_the_cores_is_busy_and_named():
    assert busy_note(3.14, 2) == "machine busy: load 3.1 on 2 cores"
    assert not is_busy(2.0, 2) and busy_note(1.9, 2) is None
    assert not is_busy(None, 2)  # a platform without a load average never claims a busy machine


def test_this_machines_load_is_read():
    load, cores = machine_load()
    assert cores >= 1 and (load is None or load >= 0)
