"""Exhaustive check, on a few parties, of the counting claim behind the early-imports charge of
``bench_tier3_turnaround.early_charged`` (README, "The three-tier allreduce's turnaround").

Run: ``python benchmarks/check_early_imports.py [--parties K] [--steps S] [--calls D] [--full]``.

The claim, in the one-way call model of the box-stage bound's proof
(:mod:`collsynth.tens.bounds.box_stages`; one-way gossip: Hedetniemi, Hedetniemi and Liestman,
"A survey of gossiping and broadcasting in communication networks", Networks 18(4), 1988): ``K``
parties (the boxes), each knowing its own input; a call ``(u, v, s)`` (a delivery leaving ``u``'s
part in NIC step ``s``) carries a nonempty part of what ``u`` knew after the calls leaving in steps
up to ``s - 2`` (it arrives in step ``s + 1`` at the earliest and is sent on a step later), and
``v`` knows it once the call is counted. ``tau``: the first step after which some party knows every
input; inside step ``tau`` the calls are taken in the order (free to choose) that makes the count
below least; ``d*`` the first call after which a party ``x`` knows everything. A party ``y != x``
is *early* if a call into it after ``d*`` leaving in step ``tau`` or ``tau + 1`` carries an input
``y`` did not know at ``d*``. The claim: a schedule with ``e`` early parties makes at least
``2 (K - 1) + e - 1`` calls (counting one more call for each party that never learns
everything; the pivot ``x`` can send it everything two steps after ``tau``).

The claim follows from a lemma on the calls up to ``d*`` (README, same section): with ``F_v``
what ``v`` knows at ``d*``, ``G_v`` what it knew after step ``tau - 1`` and ``beta`` the calls up
to ``d*`` beyond ``K - 1``, at most ``1 + beta`` parties ``y != x`` have ``F_y`` and some other
party's ``G_z`` together holding every input. The search counts, for every order inside step
``tau`` (not only the least one), the schedules where the lemma fails.

The search enumerates every set of at most ``D`` calls in steps ``1 .. S`` (``--full``: each
carrying everything its sender may send; otherwise every nonempty part of it), leaving out
calls that carry nothing their receiver did not already know a step before (such a call adds
one to the count and at most one early party and changes nobody's knowledge, so dropping it
never hides a violation of the claim or of the lemma), and
prints how many schedules were checked, the violations (the first few) and the least slack.

>>> least_slack(2, 3, 2)  # two parties exchanging in step 1: 2 calls, 1 early party, slack 0
(0, 0)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

SLACK_NONE = 1 << 20


@njit(cache=True)
def _knowledge(k, nc, cv, cs, cm, upto, out):
    for y in range(k):
        out[y] = 1 << y
    for i in range(nc):
        if cs[i] <= upto:
            out[cv[i]] |= cm[i]


@njit(cache=True)
def _least_early(k, nc, cv, cs, cm, tau, pre, ALL, lemma_extra):
    """The least early count over the orders of step ``tau``'s calls (every set of them before
    ``d*`` that completes nobody, and every ``d*`` completing its receiver)."""
    idx = np.empty(nc, np.int64)
    m = 0
    for i in range(nc):
        if cs[i] == tau:
            idx[m] = i
            m += 1
    best = SLACK_NONE
    lemma_bad = 0
    st = np.empty(k, np.int64)
    for sub in range(1 << m):
        st[:] = pre
        for a in range(m):
            if sub >> a & 1:
                st[cv[idx[a]]] |= cm[idx[a]]
        if (st == ALL).any():
            continue
        for d in range(m):
            if sub >> d & 1:
                continue
            x = cv[idx[d]]
            if (st[x] | cm[idx[d]]) != ALL:
                continue
            at_x = st[x]
            st[x] = ALL
            lemma_bad |= _pairs_over(k, nc, cs, tau, m, sub, x, st, pre, ALL, lemma_extra)
            e = 0
            for y in range(k):
                if y == x:
                    continue
                for i in range(nc):
                    later_in_tau = cs[i] == tau and i != idx[d] and not _in_subset(i, idx, m, sub)
                    if cv[i] == y and (later_in_tau or cs[i] == tau + 1) and (cm[i] & ~st[y]) != 0:
                        e += 1
                        break
            st[x] = at_x
            best = min(best, e)
    return best, lemma_bad


@njit(cache=True)
def _pairs_over(k, nc, cs, tau, m, sub, x, F, G, ALL, lemma_extra):
    """1 if the lemma fails for this order: more than ``1 + beta`` parties ``y != x`` know, at
    ``d*``, everything some other party ``z`` did not know after step ``tau - 1`` (``beta``: the
    calls up to ``d*`` beyond ``k - 1``)."""
    calls = 1
    for i in range(nc):
        if cs[i] < tau:
            calls += 1
    for a in range(m):
        calls += sub >> a & 1
    pairs = 0
    for y in range(k):
        if y == x:
            continue
        for z in range(k):
            if z != y and (F[y] | G[z]) == ALL:
                pairs += 1
                break
    return 1 if pairs > lemma_extra + calls - (k - 1) else 0


@njit(cache=True)
def _in_subset(i, idx, m, sub):
    for a in range(m):
        if idx[a] == i:
            return (sub >> a & 1) == 1
    return False


@njit(cache=True)
def _evaluate(k, S, nc, cu, cv, cs, cm, offset, lemma_extra, stats, witness):
    ALL = (1 << k) - 1
    K = np.empty(k, np.int64)
    tau = -1
    for s in range(1, S + 1):
        _knowledge(k, nc, cv, cs, cm, s, K)
        if (K == ALL).any():
            tau = s
            break
    if tau < 0:
        return
    pre = np.empty(k, np.int64)
    _knowledge(k, nc, cv, cs, cm, tau - 1, pre)
    e, lemma_bad = _least_early(k, nc, cv, cs, cm, tau, pre, ALL, lemma_extra)
    stats[3] += lemma_bad
    _knowledge(k, nc, cv, cs, cm, S, K)
    calls = nc + (K != ALL).sum()
    slack = calls - (2 * (k - 1) + e + offset)
    stats[0] += 1
    stats[2] = min(stats[2], slack)
    if slack < 0:
        if stats[1] == 0:
            witness[0] = nc
            witness[1:1 + nc] = cs[:nc] * 1000000 + cu[:nc] * 10000 + cv[:nc] * 100 + cm[:nc]
        stats[1] += 1


@njit(cache=True)
def _search(k, S, D, full, start, nc, cu, cv, cs, cm, offset, lemma_extra, stats, witness):
    _evaluate(k, S, nc, cu, cv, cs, cm, offset, lemma_extra, stats, witness)
    if nc >= D:
        return 0
    K = np.empty(k, np.int64)
    R = np.empty(k, np.int64)
    for c in range(start, S * k * (k - 1)):
        s = c // (k * (k - 1)) + 1
        r = c % (k * (k - 1))
        u = r // (k - 1)
        v = r % (k - 1)
        if v >= u:
            v += 1
        _knowledge(k, nc, cv, cs, cm, max(s - 2, 0), K)
        _knowledge(k, nc, cv, cs, cm, s - 1, R)
        have = K[u]
        part = have
        while part > 0:
            if (part & ~R[v]) != 0 and (not full or part == have):
                cu[nc], cv[nc], cs[nc], cm[nc] = u, v, s, part
                _search(k, S, D, full, c + 1, nc + 1, cu, cv, cs, cm, offset, lemma_extra, stats, witness)
            part = (part - 1) & have
    return 0


def least_slack(k: int, S: int, D: int, full: bool = False, offset: int = -1) -> tuple[int, int]:
    """``(violations, least slack)`` of ``calls >= 2 (k - 1) + e + offset`` (the claim is ``offset
    = -1``) over every schedule of at most ``D`` calls among ``k`` parties in steps ``1 .. S``."""
    got = search(k, S, D, full, offset)
    return got["violations"], got["least slack"]


def claim_terms(k: int, calls: list[tuple[int, int, int, int]]) -> tuple[int, int]:
    """``(calls counted, least early count)`` of one schedule, its calls given as ``(step,
    sender, receiver, carried inputs as a bit mask)``; the mask must lie inside what the sender
    may send (checked)."""
    S = max(c[0] for c in calls) + 1
    cs, cu, cv, cm = (np.array([c[i] for c in calls], np.int64) for i in range(4))
    K = np.empty(k, np.int64)
    for i in range(len(calls)):
        _knowledge(k, len(calls), cv, cs, cm, max(cs[i] - 2, 0), K)
        if cm[i] & ~K[cu[i]]:
            raise ValueError(f"call {calls[i]} carries what its sender does not know two steps before")
    stats = np.array([0, 0, SLACK_NONE, 0], np.int64)
    _evaluate(k, S, len(calls), cu, cv, cs, cm, 0, 1, stats, np.zeros(len(calls) + 1, np.int64))
    ALL = (1 << k) - 1
    _knowledge(k, len(calls), cv, cs, cm, S, K)
    counted = len(calls) + int((K != ALL).sum())
    return counted, int(counted - stats[2] - 2 * (k - 1))


def search(k: int, S: int, D: int, full: bool = False, offset: int = -1, lemma_extra: int = 1) -> dict:
    """The search's counts (the lemma with ``lemma_extra + beta`` boxes allowed; it claims 1) and
    its first violation of the claim as ``(step, sender, receiver, carried inputs as a bit mask)``."""
    stats = np.array([0, 0, SLACK_NONE, 0], np.int64)
    witness = np.zeros(D + 1, np.int64)
    arrays = [np.zeros(D + 1, np.int64) for _ in range(4)]
    _search(k, S, D, full, 0, 0, *arrays, offset, lemma_extra, stats, witness)
    first = [(int(w) // 1000000, int(w) // 10000 % 100, int(w) // 100 % 100, int(w) % 100)
             for w in witness[1:1 + witness[0]]]
    return {"checked": int(stats[0]), "violations": int(stats[1]), "least slack": int(stats[2]),
            "lemma violations": int(stats[3]), "first": first}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=6)
    ap.add_argument("--full", action="store_true", help="each call carries everything its sender may send")
    a = ap.parse_args()
    t = time.time()
    got = search(a.parties, a.steps, a.calls, a.full)
    print(f"parties {a.parties}, steps {a.steps}, calls <= {a.calls}{' (full calls)' if a.full else ''}: "
          f"{got['checked']:,} schedules, {got['violations']} violations, least slack {got['least slack']}, "
          f"{got['lemma violations']} schedules with an order breaking the lemma"
          f" ({time.time() - t:.1f} s)")


if __name__ == "__main__":
    main()
