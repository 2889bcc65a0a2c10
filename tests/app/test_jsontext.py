"""app/jsontext.py: JSON values as the store keeps them."""

from __future__ import annotations

from qita_board.jsontext import nul_safe


def test_nul_safe_replaces_every_nul_in_strings_and_keys_and_leaves_the_rest():
    value = {"a\x00": ["x\x00y", {"k": "\x00"}], "n": 1, "f": 0.5, "t": True, "z": None, 3: "three"}
    assert nul_safe(value) == {"a\ufffd": ["x\ufffdy", {"k": "\ufffd"}], "n": 1, "f": 0.5, "t": True, "z": None,
                               3: "three"}
    assert value["a\x00"][0] == "x\x00y"  # the value given is not changed
    assert nul_safe("a\x00") == "a\ufffd" and nul_safe(["\x00"]) == ["\ufffd"]


def test_a_value_without_nul_comes_back_as_it_is():
    value = {"a": ["x", {"k": "v"}], 3: "three"}
    assert nul_safe(value) is value  # nothing copied: what most records are
    # a backslash before `u0000` looks like a NUL in the JSON text: walked, and kept as it is
    assert nul_safe({"text": "\\u0000"}) == {"text": "\\u0000"}
    # an integer orjson cannot write is still looked at, and kept
    assert nul_safe({"big": 2**70, "s": "\x00"}) == {"big": 2**70, "s": "\ufffd"}
    assert nul_safe({"big": 2**70}) == {"big": 2**70}
