from snippets.architectures import target_sort_key


def test_targets_sort_by_number_not_by_name():
    targets = ["sm_120a", "sm_100a", "any", "sm_90a", "sm_90", "sm_100f", "sm_80"]
    assert sorted(targets, key=target_sort_key) == ["any", "sm_80", "sm_90", "sm_90a", "sm_100a", "sm_100f", "sm_120a"]
    assert sorted(targets) != sorted(targets, key=target_sort_key)  # alphabetical order would put sm_100a first
