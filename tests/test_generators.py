"""Generator invariants: node/link counts, regularity, diameters by formula or by definition,
Cayley translation metadata, expansions' numbering, the distance-regular catalogue."""

import math
from collections import Counter, deque

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances import distance_regular, generators, moore_bound
from published import DGX1_NVLINK_COUNTS

B = generators.DEFAULT_BANDWIDTH


def build(gen, **params):
    return generators.build(gen, params)


def arcs(topo):
    return Counter((u, v) for u, v in topo.graph.edges())


def bfs_diameter(n, successors):
    """Diameter of the digraph on 0..n-1 given by a successor function (independent of Topology)."""
    worst = 0
    for s in range(n):
        dist = {s: 0}
        queue = deque([s])
        while queue:
            x = queue.popleft()
            for y in successors(x):
                if y not in dist:
                    dist[y] = dist[x] + 1
                    queue.append(y)
        if len(dist) < n:
            return -1
        worst = max(worst, max(dist.values()))
    return worst


# ---- rings, meshes, tori --------------------------------------------------------------------

@given(st.integers(2, 40), st.booleans())
def test_ring(n, bi):
    t = build("ring", nodes=n, bidirectional=bi)
    assert len(t.npus) == n and t.regular
    links = n if not bi else (2 if n == 2 else 2 * n)
    assert t.num_links == links
    assert t.diameter == (n // 2 if bi else n - 1)


shapes = st.lists(st.integers(1, 6), min_size=1, max_size=3).filter(lambda d: math.prod(d) >= 2)


@given(shapes)
def test_mesh_counts_and_diameter(dims):
    t = build("mesh", dims=dims)
    n = math.prod(dims)
    assert len(t.npus) == n
    assert t.num_links == sum(2 * (d - 1) * n // d for d in dims)
    assert t.diameter == sum(d - 1 for d in dims)
    # no wrap-around links: every link joins coordinates that differ by exactly one
    for u, v in t.graph.edges():
        cu = [(u // math.prod(dims[i + 1:])) % dims[i] for i in range(len(dims))]
        cv = [(v // math.prod(dims[i + 1:])) % dims[i] for i in range(len(dims))]
        assert sum(abs(a - b) for a, b in zip(cu, cv)) == 1


@given(shapes)
def test_torus_counts_and_diameter(dims):
    t = build("torus", dims=dims)
    n = math.prod(dims)
    per_dim = {1: 0, 2: 1}
    assert t.num_links == sum(per_dim.get(d, 2) * n for d in dims)
    assert t.diameter == sum(d // 2 for d in dims)
    if all(d >= 3 for d in dims):
        assert t.regular and t.out_degree_range == (2 * len(dims),) * 2
    assert t.meta["dims"] == dims and t.meta["cayley"] == dims


@given(shapes)
def test_unidirectional_torus(dims):
    t = build("torus", dims=dims, bidirectional=False)
    assert t.diameter == sum(d - 1 for d in dims)


def test_torus_5x7_contract_numbers():
    t = build("torus", dims=[5, 7])
    assert (len(t.npus), t.num_links, t.out_degree_range, t.diameter) == (35, 140, (4, 4), 5)


@given(st.integers(1, 7))
def test_hypercube(dim):
    t = build("hypercube", dim=dim)
    assert len(t.npus) == 2**dim and t.num_links == dim * 2**dim and t.diameter == dim
    assert all(bin(u ^ v).count("1") == 1 for u, v in t.graph.edges())


@given(st.integers(2, 12))
def test_complete(n):
    t = build("complete", nodes=n)
    assert t.num_links == n * (n - 1) and t.diameter == 1 and t.regular


@given(st.integers(1, 8))
def test_complete_bipartite(d):
    t = build("complete_bipartite", degree=d)
    assert len(t.npus) == 2 * d and t.num_links == 2 * d * d and t.regular
    assert t.diameter == (1 if d == 1 else 2)
    assert nx.is_bipartite(t.graph.to_undirected())


@given(st.integers(1, 3), st.integers(2, 5))
def test_hamming(D, q):
    t = build("hamming", dims=D, q=q)
    assert len(t.npus) == q**D and t.regular and t.out_degree_range[0] == D * (q - 1)
    assert t.diameter == D


# ---- circulants, Kautz family, de Bruijn --------------------------------------------------------

@given(st.integers(3, 40), st.data(), st.booleans())
def test_circulant_diameter_by_definition(n, data, directed):
    offsets = data.draw(st.lists(st.integers(1, n - 1), min_size=1, max_size=3))
    if math.gcd(n, *offsets) != 1:
        with pytest.raises(InputError, match="offsets"):
            build("circulant", nodes=n, offsets=offsets, directed=directed)
        return
    t = build("circulant", nodes=n, offsets=offsets, directed=directed)
    steps = set(offsets) | (set() if directed else {-a for a in offsets})
    assert t.diameter == bfs_diameter(n, lambda x: [(x + s) % n for s in steps])
    assert t.regular and t.out_degree_range[0] == len({s % n for s in steps})


@given(st.integers(6, 200))
def test_circulant_degree4_best_diameter(n):
    """C(N, {a, a+1}), a = floor(sqrt((N-2)/2)), has diameter ceil((sqrt(2N-1)-1)/2) (Zhao et al., NSDI 2025, E.4, [17])."""
    a = math.floor(math.sqrt((n - 2) / 2))
    t = build("circulant", nodes=n, offsets=[a, a + 1])
    assert t.diameter == math.ceil((math.sqrt(2 * n - 1) - 1) / 2)


@given(st.integers(1, 4), st.integers(2, 60))
def test_generalized_kautz_by_definition(d, n):
    t = build("generalized_kautz", degree=d, nodes=n)
    succ = lambda x: [(-d * x - a) % n for a in range(1, d + 1)]  # noqa: E731
    assert t.diameter == bfs_diameter(n, succ)
    want = Counter((x, y) for x in range(n) for y in succ(x) if x != y)
    assert arcs(t) == want
    assert t.meta["self_loops_dropped"] == sum(1 for x in range(n) for y in succ(x) if x == y)
    if d >= 2:
        assert t.diameter <= moore_bound(n, d) + 1  # Zhao et al., NSDI 2025, Theorem 21


@pytest.mark.parametrize("d,D", [(1, 1), (2, 1), (2, 2), (2, 3), (3, 2), (2, 4), (4, 2)])
def test_kautz(d, D):
    t = build("kautz", degree=d, diameter=D)
    n = d**D + d ** (D - 1)
    assert len(t.npus) == n and t.regular and t.out_degree_range == (d, d)
    assert t.diameter == D
    assert D == moore_bound(n, d) or d == 1  # Moore optimal
    if n <= 40:  # Pi(d, d^D + d^(D-1)) is the Kautz graph (Zhao et al., NSDI 2025, Definition 16)
        gk = build("generalized_kautz", degree=d, nodes=n)
        assert nx.is_isomorphic(nx.DiGraph(t.graph), nx.DiGraph(gk.graph))


@pytest.mark.parametrize("d,D", [(2, 1), (2, 3), (3, 2), (2, 5), (3, 3)])
def test_de_bruijn(d, D):
    t = build("de_bruijn", degree=d, diameter=D)
    n = d**D
    assert len(t.npus) == n and t.diameter == D
    assert t.meta["self_loops_dropped"] == d
    assert t.num_links == d * n - d
    assert t.diameter == bfs_diameter(n, lambda x: [(d * x + a) % n for a in range(d)])


def test_line_graph_of_kautz_is_kautz():
    lk = build("line_graph", base={"generator": "kautz", "degree": 2, "diameter": 2})
    k3 = build("kautz", degree=2, diameter=3)
    assert nx.is_isomorphic(nx.DiGraph(lk.graph), nx.DiGraph(k3.graph))


# ---- twisted torus, DGX-1, dragonfly, HyperX, HammingMesh ------------------------------------

@given(st.integers(2, 9))
def test_twisted_torus(a):
    t = build("twisted_torus", a=a)
    assert len(t.npus) == 2 * a * a and t.regular and t.out_degree_range == (4, 4)
    assert t.diameter == a
    plain = build("torus", dims=[2 * a, a])
    assert plain.diameter == a + a // 2 and t.diameter <= plain.diameter


def test_dgx1_six_links_per_gpu():
    t = build("dgx1")
    assert len(t.npus) == 8 and t.num_links == 48
    assert all(t.out_degrees[g] == 6 and t.in_degrees[g] == 6 for g in range(8))
    counts = arcs(t)
    for i, row in enumerate(DGX1_NVLINK_COUNTS):
        for j, k in enumerate(row):
            assert counts.get((i, j), 0) == k == DGX1_NVLINK_COUNTS[j][i]
    assert t.diameter == 2


@given(st.integers(1, 5), st.integers(1, 3), st.data())
def test_dragonfly(a, h, data):
    most = a * h + 1
    g = data.draw(st.integers(2, most))
    t = build("dragonfly", group_size=a, global_links=h, groups=g)
    assert len(t.npus) == a * g
    assert t.num_links == g * a * (a - 1) + g * (g - 1)
    pairs = Counter((u // a, v // a) for u, v in t.graph.edges() if u // a != v // a)
    assert set(pairs.values()) == {1} and len(pairs) == g * (g - 1)  # one link per ordered group pair
    assert max(t.out_degrees.values()) <= (a - 1) + h
    assert t.diameter <= 3
    if g == most:
        assert t.regular


def test_dragonfly_global_scale_sets_bandwidth():
    t = generators.build("dragonfly", {"group_size": 4, "global_scale": 0.5}, bandwidth=400e9)
    bw = {(u // 4 == v // 4): d["bandwidth"] for u, v, d in t.graph.edges(data=True)}
    assert bw == {True: 400e9, False: 200e9}


@given(st.lists(st.integers(1, 5), min_size=1, max_size=3).filter(lambda d: math.prod(d) >= 2), st.integers(1, 2))
def test_hyperx(dims, k):
    t = build("hyperx", dims=dims, trunking=k)
    assert t.regular and t.out_degree_range[0] == k * sum(d - 1 for d in dims)
    assert t.diameter == sum(1 for d in dims if d > 1)


@given(st.integers(1, 4), st.integers(1, 4))
def test_hammingmesh_with_1x1_boards_is_hyperx(x, y):
    if x * y < 2:
        return
    hm = build("hammingmesh", board=[1, 1], grid=[x, y])
    hx = build("hyperx", dims=[x, y])
    assert arcs(hm) == arcs(hx)


def test_hammingmesh_boards_and_fabric():
    t = build("hammingmesh", board=[2, 2], grid=[2, 2])
    # board-internal mesh links: 4 boards x 8 directed links; fabric: each global row/column
    # has 4 members on 2 boards, 4 cross-board pairs, 8 rows+columns -> 64 directed links
    assert t.num_links == 4 * 8 + 8 * 4 * 2
    s = build("hammingmesh", board=[2, 2], grid=[2, 2], fabric="switch")
    assert len(s.switches) == 8 and len(s.npus) == 16
    assert all(s.out_degrees[w] == 4 for w in s.switches)


# ---- switches, hierarchy, optics --------------------------------------------------------------

@given(st.integers(2, 12), st.data())
def test_switch_unwinding(n, data):
    d = data.draw(st.integers(0, n - 1))
    t = generators.build("switch", {"nodes": n, "unwind": d}, bandwidth=120e9)
    if d == 0:
        assert t.switches == frozenset({n}) and t.size == n + 1 and t.num_links == 2 * n
        assert t.diameter == (2 if n > 1 else 0)
        assert all(dat["bandwidth"] == 120e9 for _, _, dat in t.graph.edges(data=True))
    else:
        assert not t.switches and t.num_links == n * d and t.regular
        assert set(arcs(t)) == {(u, (u + k) % n) for u in range(n) for k in range(1, d + 1)}
        assert all(dat["bandwidth"] == pytest.approx(120e9 / d) for _, _, dat in t.graph.edges(data=True))
        assert t.diameter == math.ceil((n - 1) / d)


def test_hierarchical_tacos_ring_fc_switch():
    t = generators.build(
        "hierarchical",
        {"levels": ["ring", "complete", "switch"], "dims": [2, 4, 3], "scales": [4, 2, 1], "unwind": [0, 0, 1]},
        bandwidth=50e9,
    )
    assert len(t.npus) == 24 and not t.switches
    by_level = Counter()
    for u, v, d in t.graph.edges(data=True):
        cu = (u // 12, (u // 3) % 4, u % 3)
        cv = (v // 12, (v // 3) % 4, v % 3)
        axis = [i for i in range(3) if cu[i] != cv[i]]
        assert len(axis) == 1
        by_level[(axis[0], d["bandwidth"])] += 1
    # ring of 2: one link each way per group (12 groups); complete 4: 12 per group (6 groups);
    # switch of 3 unwound to degree 1: a unidirectional ring, 3 links per group (8 groups)
    assert by_level == {(0, 200e9): 24, (1, 100e9): 72, (2, 50e9): 24}
    assert t.diameter == 1 + 1 + 2
    kept = build("hierarchical", levels=["ring", "switch"], dims=[3, 4])
    assert len(kept.switches) == 3 and kept.size == 15


def test_optical_ring_meta_and_bandwidth():
    t = build("optical_ring", nodes=8, wavelengths=4, wavelength_bandwidth=25e9, reconfig_s=1e-5, oeo_s=1e-6)
    assert t.meta["optical"] == {"wavelengths": 4, "wavelength_bandwidth": 25e9, "reconfig_s": 1e-5, "oeo_s": 1e-6}
    assert t.num_links == 16 and t.diameter == 4
    assert {d["bandwidth"] for _, _, d in t.graph.edges(data=True)} == {100e9}
    plain = generators.build("optical_ring", {"nodes": 5, "wavelengths": 2}, bandwidth=3e9)
    assert {d["bandwidth"] for _, _, d in plain.graph.edges(data=True)} == {3e9}


# ---- distance-regular catalogue ----------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(distance_regular.CATALOGUE))
def test_distance_regular_catalogue_matches_table7(name):
    entry = distance_regular.CATALOGUE[name]
    g = distance_regular.graph(name)
    assert nx.is_distance_regular(g)
    b, c = nx.intersection_array(g)
    assert (tuple(b), tuple(c)) == entry.intersection_array
    t = build("distance_regular", name=name)
    assert len(t.npus) == entry.nodes and t.out_degree_range == (entry.degree, entry.degree)
    assert t.diameter == entry.diameter == len(b)


def test_table7_required_entries_present():
    need = {"octahedron", "paley9", "k55_minus_matching", "heawood_distance3", "petersen_line", "cube4",
            "heawood_line", "pg23_incidence", "odd4"}
    assert need <= set(distance_regular.CATALOGUE)


# ---- expansions -----------------------------------------------------------------------------

BASES = [
    {"generator": "kautz", "degree": 2, "diameter": 2},
    {"generator": "ring", "nodes": 5},
    {"generator": "complete_bipartite", "degree": 2},
    {"generator": "circulant", "nodes": 7, "offsets": [1, 3], "directed": True},
]


@pytest.mark.parametrize("base", BASES)
def test_line_graph_numbering(base):
    g = build(base["generator"], **{k: v for k, v in base.items() if k != "generator"})
    garcs = sorted(g.graph.edges(keys=True))
    lg = build("line_graph", base=base)
    d = g.out_degree_range[1]
    assert len(lg.npus) == len(garcs) and lg.regular == g.regular and lg.out_degree_range[1] == d
    want = Counter((i, j) for i, e in enumerate(garcs) for j, f in enumerate(garcs) if e[1] == f[0])
    assert arcs(lg) == want
    if g.regular:
        assert lg.diameter == g.diameter + 1  # Zhao et al., NSDI 2025: T_L' = T_L + 1 (BFB steps = diameter)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("copies", [1, 2, 3])
def test_degree_expansion_numbering(base, copies):
    g = build(base["generator"], **{k: v for k, v in base.items() if k != "generator"})
    de = build("degree_expansion", base=base, copies=copies)
    n = copies
    want = Counter((u * n + i, v * n + j) for u, v in g.graph.edges() for i in range(n) for j in range(n))
    assert arcs(de) == want
    assert len(de.npus) == n * len(g.npus) and de.out_degree_range[1] == n * g.out_degree_range[1]


@given(st.integers(2, 6), st.integers(2, 6))
def test_cartesian_of_rings_is_the_torus(n, m):
    prod = build("cartesian", base={"generator": "ring", "nodes": n}, other={"generator": "ring", "nodes": m})
    assert arcs(prod) == arcs(build("torus", dims=[n, m]))
    assert prod.meta["cayley"] == [n, m]


@given(st.integers(2, 4), st.integers(1, 3))
def test_cartesian_power_of_complete_is_hamming(q, D):
    power = build("cartesian", base={"generator": "complete", "nodes": q}, times=D)
    assert arcs(power) == arcs(build("hamming", dims=D, q=q))
    assert power.diameter == D


def test_nested_base_from_command_line_strings():
    a = generators.build("line_graph", {"base": "kautz:degree=2:diameter=2"})
    b = generators.build("line_graph", {"base": '{"generator": "kautz", "degree": 2, "diameter": 2}'})
    assert arcs(a) == arcs(b) and len(a.npus) == 12


# ---- Cayley metadata: translations are automorphisms ------------------------------------------

CAYLEY_CASES = [
    ("ring", {"nodes": 7}), ("ring", {"nodes": 6, "bidirectional": False}), ("torus", {"dims": [3, 4]}),
    ("torus", {"dims": [2, 3, 4]}), ("hypercube", {"dim": 3}), ("complete", {"nodes": 5}),
    ("complete_bipartite", {"degree": 3}), ("hamming", {"dims": 2, "q": 3}),
    ("circulant", {"nodes": 10, "offsets": [1, 3]}), ("hyperx", {"dims": [2, 3]}),
    ("switch", {"nodes": 6, "unwind": 2}), ("optical_ring", {"nodes": 5, "wavelengths": 2}),
    ("cartesian", {"base": {"generator": "ring", "nodes": 3}, "other": {"generator": "complete", "nodes": 4}}),
]


@pytest.mark.parametrize("name,params", CAYLEY_CASES)
def test_cayley_translations_are_automorphisms(name, params):
    t = generators.build(name, params)
    orders = t.meta["cayley"]
    assert math.prod(orders) == len(t.npus)

    def coords(x):
        out = []
        for o in reversed(orders):
            out.append(x % o)
            x //= o
        return out[::-1]

    def index(c):
        x = 0
        for ci, o in zip(c, orders):
            x = x * o + ci
        return x

    edges = arcs(t)
    for axis in range(len(orders)):
        shift = [1 if i == axis else 0 for i in range(len(orders))]
        moved = Counter()
        for (u, v), k in edges.items():
            tu = index([(a + s) % o for a, s, o in zip(coords(u), shift, orders)])
            tv = index([(a + s) % o for a, s, o in zip(coords(v), shift, orders)])
            moved[(tu, tv)] += k
        assert moved == edges


def test_generators_without_translation_group_do_not_claim_one():
    for name, params in [("mesh", {"dims": [3, 3]}), ("kautz", {"degree": 2, "diameter": 2}), ("dgx1", {}),
                         ("twisted_torus", {"a": 3})]:
        assert "cayley" not in generators.build(name, params).meta


# ---- registry ------------------------------------------------------------------------------------

REQUIRED = {
    "ring": {"nodes", "bidirectional"}, "mesh": {"dims"}, "torus": {"dims", "bidirectional"}, "hypercube": {"dim"},
    "complete": {"nodes"}, "complete_bipartite": {"degree"}, "hamming": {"dims", "q"},
    "circulant": {"nodes", "offsets", "directed"}, "kautz": {"degree", "diameter"}, "de_bruijn": {"degree", "diameter"},
    "generalized_kautz": {"degree", "nodes"}, "twisted_torus": {"a"}, "dgx1": set(), "switch": {"nodes", "unwind"},
    "optical_ring": {"nodes", "wavelengths", "wavelength_bandwidth", "reconfig_s", "oeo_s"},
    "distance_regular": {"name"}, "line_graph": {"base", "times"}, "degree_expansion": {"base", "copies"},
    "cartesian": {"base", "times"}, "dragonfly": set(), "hyperx": {"dims"}, "hammingmesh": set(), "hierarchical": {"levels", "dims"},
}


def test_contract_generators_and_parameters():
    rows = {r["name"]: r for r in generators.describe()}
    for name, params in REQUIRED.items():
        assert name in rows, name
        assert params <= set(rows[name]["parameters"]), name
        assert rows[name]["summary"], name
    assert generators.parameters("circulant")["directed"]["default"] is False
    assert generators.parameters("circulant")["offsets"]["type"] == "list[int]"


@pytest.mark.parametrize("name,params,field", [
    ("ring", {"nodes": 1}, "nodes"), ("mesh", {"dims": [0, 3]}, "dims"), ("hypercube", {"dim": 0}, "dim"),
    ("complete_bipartite", {"degree": 0}, "degree"), ("hamming", {"dims": 2, "q": 1}, "q"),
    ("circulant", {"nodes": 8, "offsets": [8]}, "offsets"), ("circulant", {"nodes": 8, "offsets": [2, 4]}, "offsets"),
    ("kautz", {"degree": 2, "diameter": 0}, "diameter"), ("generalized_kautz", {"degree": 0, "nodes": 5}, "degree"),
    ("de_bruijn", {"degree": 1, "diameter": 3}, "degree"), ("twisted_torus", {"a": 1}, "a"),
    ("dragonfly", {"group_size": 2, "groups": 9}, "groups"), ("hyperx", {"dims": []}, "dims"),
    ("hammingmesh", {"board": [2], "grid": [2, 2]}, "board"), ("hammingmesh", {"board": [2, 2], "grid": [2, 2], "fabric": "x"}, "fabric"),
    ("switch", {"nodes": 4, "unwind": 4}, "unwind"), ("hierarchical", {"levels": ["ring", "torus"], "dims": [2, 2]}, "levels"),
    ("hierarchical", {"levels": ["ring"], "dims": [2, 2]}, "dims"),
    ("optical_ring", {"nodes": 4, "wavelengths": 0}, "wavelengths"), ("optical_ring", {"nodes": 4, "wavelengths": 2, "oeo_s": -1.0}, "oeo_s"),
    ("distance_regular", {"name": "petersen"}, "name"), ("line_graph", {"base": {"nodes": 3}}, "base.generator"),
    ("line_graph", {"base": {"generator": "ring", "nodes": 4, "bandwidth": 1.0}}, "base.bandwidth"),
    ("line_graph", {"base": {"generator": "switch", "nodes": 4}}, "base"),
    ("cartesian", {"base": "ring:nodes=3", "times": 3, "other": "ring:nodes=3"}, "times"),
    ("degree_expansion", {"base": "ring:nodes=3", "copies": 0}, "copies"),
    ("line_graph", {"base": "ring:nodes=x"}, "base.nodes"),
])
def test_bad_generator_values_name_the_field(name, params, field):
    with pytest.raises(InputError) as err:
        generators.build(name, params)
    assert err.value.where == f"topology.{field}"
