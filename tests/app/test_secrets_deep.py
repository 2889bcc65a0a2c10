"""mask_data at any depth: a secret at the bottom of deeply nested data is masked like any other."""

from __future__ import annotations

from qita_board.secrets import mask_data


def test_a_secret_3000_levels_down_is_masked_and_the_shape_kept():
    value = "password=hunter22"
    for i in range(3000):
        value = {"k": value} if i % 2 else [value]
    masked = mask_data(value)
    depth, node = 0, masked
    while not isinstance(node, str):
        assert isinstance(node, dict if depth % 2 == 0 else list)  # the outermost is the last one made: a dict
        node = node["k"] if isinstance(node, dict) else node[0]
        depth += 1
    assert depth == 3000 and node == "password=[secret masked: password]"


def test_order_tuples_and_keys_survive_masking():
    data = {"z": 1, "a": ("x", {"password": "pw-1", "AKIAIOSFODNN7EXAMPLE": [None, 2.5]}), "m": [], 3: "plain"}
    assert list(mask_data(data).items()) == [
        ("z", 1),
        ("a", ("x", {"password": "[secret masked: password]", "[secret masked: aws-access-key …MPLE]": [None, 2.5]})),
        ("m", []),
        (3, "plain"),
    ]
