"""Reference.draw: get_inputs() memoized on the file, its constants and the random states it may
read (kgen/frontend/reference.py, _DRAWS). A repeat gives the same values and leaves the random
states where the real call would have; anything a draw can depend on that differs gives a fresh
draw. CPU."""
import random

import numpy
import pytest
import torch

from kgen.frontend import reference
from kgen.frontend.reference import Reference

SOURCE = '''
import random
import numpy
import torch
import torch.nn as nn

batch_size = 4
features = 8


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.rand(batch_size, features) + {extra}]


def get_init_inputs():
    return [features]
'''


@pytest.fixture(autouse=True)
def fresh_draws(monkeypatch):
    monkeypatch.setattr(reference, "_DRAWS", {})


def ref(tmp_path, extra="0"):
    path = tmp_path / "model.py"
    path.write_text(SOURCE.replace("{extra}", extra))
    return Reference(path)


def seeded_draw(r, seed):
    torch.manual_seed(seed)
    (x,) = r.draw()
    return x, torch.rand(3)   # the state the draw left behind, read


def test_a_repeat_gives_the_values_and_the_state_the_call_would(tmp_path):
    r = ref(tmp_path)
    first, after_first = seeded_draw(r, 1)
    assert len(reference._DRAWS) == 1
    again, after_again = seeded_draw(r, 1)
    assert torch.equal(first, again) and torch.equal(after_first, after_again)
    torch.manual_seed(1)
    (plain,) = r.module.get_inputs()
    assert torch.equal(plain, first) and torch.equal(torch.rand(3), after_first)


def test_another_seed_draws_afresh(tmp_path):
    r = ref(tmp_path)
    a, _ = seeded_draw(r, 1)
    b, _ = seeded_draw(r, 2)
    assert not torch.equal(a, b) and len(reference._DRAWS) == 2


def test_what_a_caller_does_to_its_values_stays_its_own(tmp_path):
    r = ref(tmp_path)
    a, _ = seeded_draw(r, 1)
    kept = a.clone()
    a.mul_(0)
    b, _ = seeded_draw(r, 1)
    assert torch.equal(b, kept)


@pytest.mark.parametrize("extra, reseed", [
    ("random.random()", lambda s: random.seed(s)),
    ("float(numpy.random.rand())", lambda s: numpy.random.seed(s)),
])
def test_pythons_and_numpys_states_are_part_of_the_key(tmp_path, extra, reseed):
    r = ref(tmp_path, extra)
    reseed(10)
    a, _ = seeded_draw(r, 1)
    reseed(11)
    b, _ = seeded_draw(r, 1)
    assert not torch.equal(a, b)
    reseed(10)
    c, _ = seeded_draw(r, 1)
    assert torch.equal(a, c)


def test_a_changed_constant_draws_afresh(tmp_path):
    r = ref(tmp_path)
    a, _ = seeded_draw(r, 1)
    r.module.batch_size = 6
    b, _ = seeded_draw(r, 1)
    assert a.shape == (4, 8) and b.shape == (6, 8)


def test_two_files_do_not_share_draws(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, _ = seeded_draw(ref(tmp_path / "a"), 1)
    b, _ = seeded_draw(ref(tmp_path / "b", "1"), 1)
    assert torch.allclose(a + 1, b)


def test_past_the_cap_a_draw_is_not_kept_and_still_right(tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "_DRAW_BYTES", 4 * 8 * 4)   # one 4 x 8 fp32 draw
    r = ref(tmp_path)
    seeded_draw(r, 1)
    a, after = seeded_draw(r, 2)
    assert len(reference._DRAWS) == 1
    torch.manual_seed(2)
    (plain,) = r.module.get_inputs()
    assert torch.equal(plain, a) and torch.equal(torch.rand(3), after)


def test_inputs_of_more_rows_than_a_draw_are_draws_in_turn(tmp_path):
    r = ref(tmp_path)
    torch.manual_seed(3)
    (x,) = r.inputs(10)
    torch.manual_seed(3)
    parts = [r.module.get_inputs()[0] for _ in range(3)]
    assert torch.equal(x, torch.cat(parts)[:10])


OWN_SOURCE = '''
import random
import numpy
import torch
import torch.nn as nn

{source}


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [{draw}]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("source, draw", [
    ("_g = torch.Generator().manual_seed(0)", "torch.rand(4, 8, generator=_g)"),
    ("_rng = numpy.random.default_rng(0)", "torch.from_numpy(_rng.random((4, 8)))"),
    ("_r = random.Random(0)", "torch.tensor([[_r.random() for _ in range(8)] for _ in range(4)])"),
    ("_base = torch.rand(4, 8)", "_base * 1.0"),
])
def test_a_file_with_a_random_source_of_its_own_is_drawn_each_time(tmp_path, source, draw):
    """What the key cannot see (a generator object of the file's, a tensor it drew at import)
    turns the memo off for that file: each call is get_inputs() itself."""
    path = tmp_path / "own.py"
    path.write_text(OWN_SOURCE.replace("{source}", source).replace("{draw}", draw))
    r = Reference(path)
    a, _ = seeded_draw(r, 1)
    b, _ = seeded_draw(r, 1)
    assert reference._DRAWS == {}
    if "_base" in source:   # another Reference of the file draws its own _base at import
        torch.manual_seed(5)
        assert not torch.equal(a, seeded_draw(Reference(path), 1)[0])
        return
    assert not torch.equal(a, b)   # the file's own generator moved on; torch's seed does not reset it
    (x,) = r.inputs(8)
    assert not torch.equal(x[:4], x[4:])


def test_a_leaf_that_requires_grad_comes_back_one(tmp_path):
    r = ref(tmp_path, "0")
    r.module.get_inputs = lambda: [torch.rand(4, 8).requires_grad_()]
    for _ in range(2):
        torch.manual_seed(1)
        (x,) = r.draw()
        assert x.is_leaf and x.requires_grad
    assert len(reference._DRAWS) == 1


def test_a_draw_off_the_cpu_is_not_kept(tmp_path):
    r = ref(tmp_path, "0")
    r.module.get_inputs = lambda: [torch.empty(4, 8, device="meta")]
    seeded_draw(r, 1)
    assert reference._DRAWS == {}


def test_the_default_dtype_is_part_of_the_key(tmp_path):
    r = ref(tmp_path)
    a, _ = seeded_draw(r, 1)
    torch.set_default_dtype(torch.float64)
    try:
        b, _ = seeded_draw(r, 1)
    finally:
        torch.set_default_dtype(torch.float32)
    assert a.dtype == torch.float32 and b.dtype == torch.float64
