"""The exhaustive check of the early-imports counting claim (benchmarks/check_early_imports.py):
its count on schedules derived by hand, no violation of the claim or of the lemma it follows from
on every schedule of three parties in three steps, and violations found when either is made one
stronger (so the check can fail)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import check_early_imports as check  # noqa: E402

A, B, C = 1, 2, 4  # the parties' inputs as bits of a mask


def test_two_parties_exchanging_by_hand():
    """A and B call each other in step 1: after the first call one of them knows both (``d*``),
    the other call leaves in ``d*``'s step: 2 calls, 1 early party, ``2 >= 2 + 1 - 1``."""
    assert check.claim_terms(2, [(1, 0, 1, A), (1, 1, 0, B)]) == (2, 1)


def test_three_parties_completed_early_by_hand():
    """A tells B in step 1; in step 3 B sends {A, B} to C and to A, C sends {C} to A and to B.
    Every call of step 3 carries what its sender knew after step 1; whichever completes a
    party first is ``d*``, and the other two parties each get a new input later in step 3: 5
    calls, 2 early parties, ``5 >= 4 + 2 - 1`` (tight)."""
    calls = [(1, 0, 1, A), (3, 1, 2, A | B), (3, 2, 0, C), (3, 2, 1, C), (3, 1, 0, A | B)]
    assert check.claim_terms(3, calls) == (5, 2)


def test_a_call_sending_what_its_sender_cannot_know_is_refused():
    """B cannot forward A's input in step 2 what it received in step 1 (it arrives in step 2)."""
    with pytest.raises(ValueError, match="two steps before"):
        check.claim_terms(3, [(1, 0, 1, A), (2, 1, 2, A | B)])


def test_no_violation_among_three_parties_and_one_call_stronger_fails():
    assert check.least_slack(3, 3, 5) == (0, 0)
    violations, slack = check.least_slack(3, 3, 5, offset=0)
    assert violations > 0 and slack == -1


def test_the_lemma_holds_among_three_parties_and_fails_one_box_stronger():
    """The lemma (at most ``1 + beta`` boxes other than ``x`` completed by one delivery sent
    from what was known before ``tau``) on every schedule of three boxes in three steps; with
    ``beta`` boxes allowed it fails: two boxes exchanging in step 1 (``beta = 0``, ``y = w``)."""
    assert check.search(3, 3, 5)["lemma violations"] == 0
    assert check.search(3, 3, 5, lemma_extra=0)["lemma violations"] > 0


def test_docstring_examples():
    """The module's docstring example (benchmarks are not a package: the doctest suite skips them)."""
    import doctest

    result = doctest.testmod(check)
    assert result.attempted >= 1 and result.failed == 0
