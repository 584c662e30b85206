"""Layer mappings (bert_kd.core.layer_maps): every example from the spec plus error cases."""

import pytest

from bert_kd.core.layer_maps import STRATEGIES, check_strategy, connected_layers, layer_map


@pytest.mark.parametrize(
    "strategy, n_t, n_s, expected",
    [
        ("pkd_skip", 12, 6, [[2], [4], [6], [8], [10], []]),
        ("pkd_skip", 12, 4, [[3], [6], [9], []]),
        ("pkd_last", 12, 6, [[7], [8], [9], [10], [11], []]),
        ("pkd_last", 12, 4, [[9], [10], [11], []]),
        ("buckets_no", 12, 4, [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], []]),
        ("buckets_po", 12, 4, [[1, 2, 3, 4, 5], [5, 6, 7, 8, 9], [9, 10, 11, 12], []]),
        ("buckets_no", 12, 2, [list(range(1, 13)), []]),
        ("buckets_po", 12, 2, [list(range(1, 13)), []]),
        ("all", 12, 4, [list(range(1, 13))] * 3 + [[]]),
        ("one_to_many", 12, 4, [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]]),
        ("one_to_many", 12, 5, [[1, 2, 3], [4, 5, 6], [7, 8], [9, 10], [11, 12]]),
        ("one_to_many", 6, 4, [[1, 2], [3, 4], [5], [6]]),
        ("one_to_many", 6, 3, [[1, 2], [3, 4], [5, 6]]),
        ("one_to_many", 4, 1, [[1, 2, 3, 4]]),
        ("distilbert", 12, 6, [[1], [3], [5], [8], [10], [12]]),
        ("distilbert", 6, 2, [[2], [6]]),
        ("distilbert", 6, 3, [[1], [4], [6]]),
        ("distilbert", 6, 6, [[1], [2], [3], [4], [5], [6]]),  # ties bumped -> identity
        ("distilbert", 12, 1, [[12]]),
    ],
)
def test_named_strategies(strategy, n_t, n_s, expected):
    assert layer_map(strategy, n_t, n_s) == expected


def test_strategies_tuple_lists_every_name():
    assert set(STRATEGIES) == {
        "pkd_skip",
        "pkd_last",
        "bucket_first",
        "buckets_no",
        "buckets_po",
        "all",
        "one_to_many",
        "distilbert",
    }
    for name in STRATEGIES:
        m = layer_map(name, 12, 4)
        assert len(m) == 4
        assert all(1 <= k <= 12 for entry in m for k in entry)


def test_uneven_buckets_no_sizes_differ_by_at_most_one():
    m = layer_map("buckets_no", 12, 6)  # 5 connected layers over 12 teacher layers
    assert m[-1] == []
    sizes = [len(b) for b in m[:-1]]
    assert sizes == [3, 3, 2, 2, 2]
    assert [k for b in m[:-1] for k in b] == list(range(1, 13))


def test_buckets_po_shares_boundary_with_next_bucket():
    no = layer_map("buckets_no", 12, 6)
    po = layer_map("buckets_po", 12, 6)
    for i in range(len(no) - 2):
        assert po[i] == no[i] + [no[i + 1][0]]
    assert po[-2] == no[-2] and po[-1] == []


@pytest.mark.parametrize("n_t, n_s", [(12, 5), (6, 4), (12, 4), (6, 3), (7, 7), (13, 4), (24, 7)])
def test_one_to_many_properties(n_t, n_s):
    groups = layer_map("one_to_many", n_t, n_s)
    assert len(groups) == n_s
    assert all(groups), "every student layer is connected"
    for g in groups:  # contiguous
        assert g == list(range(g[0], g[0] + len(g)))
    flat = [k for g in groups for k in g]
    assert flat == list(range(1, n_t + 1)), "each teacher layer exactly once, in order"
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)


def test_one_to_many_uneven_sizes():
    assert [len(g) for g in layer_map("one_to_many", 12, 5)] == [3, 3, 2, 2, 2]
    assert [len(g) for g in layer_map("one_to_many", 6, 4)] == [2, 2, 1, 1]


@pytest.mark.parametrize("n_t, n_s", [(12, 6), (12, 4), (12, 5), (7, 6), (24, 6), (9, 6), (12, 12)])
def test_distilbert_every_layer_connected_increasing_in_range(n_t, n_s):
    m = layer_map("distilbert", n_t, n_s)
    flat = [e[0] for e in m]
    assert all(len(e) == 1 for e in m)
    assert flat == sorted(set(flat)), "strictly increasing"
    assert flat[0] >= 1 and flat[-1] == n_t


def test_explicit_mapping_is_validated_and_copied():
    spec = [[1, 2], (3,), []]
    out = layer_map(spec, 4, 3)
    assert out == [[1, 2], [3], []]
    assert all(isinstance(e, list) for e in out)
    # explicit lists may have more student than teacher layers
    assert layer_map([[1], [1], [2]], 2, 3) == [[1], [1], [2]]


@pytest.mark.parametrize(
    "spec, n_t, n_s, match",
    [
        ([[1], [2]], 12, 3, "2 entries"),
        ([[1], [13], []], 12, 3, "student layer 2"),
        ([[1], [0], []], 12, 3, "teacher layer 0"),
        ([[1], [2.0], []], 12, 3, "student layer 2"),
        ([[1], 2, []], 12, 3, "student layer 2"),
        ([[1], [True], []], 12, 3, "student layer 2"),
        ([[1, 1], [2], []], 12, 3, "twice"),
    ],
)
def test_explicit_mapping_errors(spec, n_t, n_s, match):
    with pytest.raises(ValueError, match=match):
        layer_map(spec, n_t, n_s)


def test_unknown_strategy_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown.*pkd_skip.*one_to_many"):
        layer_map("first", 12, 6)
    with pytest.raises(ValueError):
        layer_map(3, 12, 6)


@pytest.mark.parametrize("n_t, n_s", [(0, 1), (12, 0), (-1, 2), (12, -3)])
def test_bad_counts(n_t, n_s):
    with pytest.raises(ValueError, match=">= 1"):
        layer_map("one_to_many", n_t, n_s)
    with pytest.raises(ValueError, match=">= 1"):
        layer_map([], n_t, n_s)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_more_students_than_teachers_rejected_for_named(strategy):
    with pytest.raises(ValueError, match="n_student <= n_teacher"):
        layer_map(strategy, 4, 6)


@pytest.mark.parametrize(
    "strategy", ["pkd_skip", "pkd_last", "bucket_first", "buckets_no", "buckets_po", "all", "teacher_layer:1"]
)
def test_single_layer_student_rejected_when_last_layer_unconnected(strategy):
    with pytest.raises(ValueError, match="n_student >= 2"):
        layer_map(strategy, 12, 1)


# --------------------------------------------------------------------------- ALP-KD's baseline maps


@pytest.mark.parametrize(
    "n_t, n_s, expected",
    [
        (12, 4, [[1], [5], [9], []]),  # ALP-KD Sec. 4: A(1) = h^1, A(2) = h^5, A(3) = h^9, last unconnected
        (12, 6, [[1], [4], [7], [9], [11], []]),  # first layers of the buckets_no buckets 3,3,2,2,2
        (12, 2, [[1], []]),  # one bucket: PKD-1 of Table 3
        (6, 2, [[1], []]),  # MiniLM-L6 teacher, 2-layer student (the CPU protocol)
    ],
)
def test_bucket_first_is_the_first_layer_of_each_buckets_no_bucket(n_t, n_s, expected):
    assert layer_map("bucket_first", n_t, n_s) == expected
    assert layer_map("bucket-first", n_t, n_s) == expected
    buckets = layer_map("buckets_no", n_t, n_s)
    assert [entry[:1] for entry in buckets] == expected


def test_bucket_first_differs_from_sun_et_al_skip_map():
    assert layer_map("pkd_skip", 12, 4) == [[3], [6], [9], []]  # kept as a named option
    assert layer_map("bucket_first", 12, 4) != layer_map("pkd_skip", 12, 4)


@pytest.mark.parametrize("n_t, layers", [(12, (1, 6, 12)), (6, (1, 3, 6))])
def test_pkd_single_teacher_layer_maps(n_t, layers):
    """ALP-KD Table 3: S_PKD-l distils teacher layer l into the first of two student layers."""
    for layer in layers:
        expected = [[layer], []]
        assert layer_map(f"teacher_layer:{layer}", n_t, 2) == expected
        assert layer_map(expected, n_t, 2) == expected  # the same map given explicitly
    assert layer_map("teacher_layer:5", 12, 4) == [[5], [], [], []]


@pytest.mark.parametrize(
    "spec, match",
    [
        ("teacher_layer:13", "outside 1..12"),
        ("teacher_layer:0", "outside 1..12"),
        ("teacher_layer:x", "not a teacher layer"),
    ],
)
def test_single_teacher_layer_errors(spec, match):
    with pytest.raises(ValueError, match=match):
        layer_map(spec, 12, 2)


def test_connected_layers():
    assert connected_layers(layer_map("pkd_skip", 12, 6)) == [1, 2, 3, 4, 5]
    assert connected_layers(layer_map("one_to_many", 12, 4)) == [1, 2, 3, 4]
    assert connected_layers([[], [3], [], [1, 2]]) == [2, 4]
    assert connected_layers([]) == []


def test_check_strategy_without_layer_counts():
    for ok in ("bucket_first", "PKD-Skip", "teacher_layer:12", [[1], []]):
        check_strategy(ok)
    for bad, match in (
        ("bucket_frist", "unknown layer-mapping strategy"),
        ("teacher_layer:-1", "not a teacher layer"),
        (["1"], "list of teacher-layer lists"),
        (3, "strategy name"),
    ):
        with pytest.raises(ValueError, match=match):
            check_strategy(bad)
