"""The entity links and the hop walk every strategy shares (core.strategies.entity_links)."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
import pytest

from core.persist import array_to_bytes
from core.strategies.bridge import BridgeConfig
from core.strategies.entity_links import (
    EntityLinks,
    HopConfig,
    confident_units,
    is_nameable,
    keep_confident,
    links_files,
    links_from_files,
)

# A three-hop chain: the song's passage names its composer, the composer's names his town.
TITLES = ["Alpha Song", "Bob Composer", "Carl Town", "Other Thing", None]
TEXTS = [
    "Alpha Song\nAlpha Song is a ballad written by Bob Composer in 1910.",
    "Bob Composer\nBob Composer was born in Carl Town and wrote many songs.",
    "Carl Town\nCarl Town is a small port on the northern coast.",
    "Other Thing\nOther Thing is unrelated to everything else here.",
    "A note without a title that mentions Alpha Song once.",
]
ABOUT = [[t] if t else [] for t in TITLES]
ENTITIES = [["Bob Composer"], ["Carl Town"], [], [], ["Alpha Song"]]
QUERY = "Where was the composer of Alpha Song born?"


def _links() -> EntityLinks:
    links = EntityLinks()
    links.add_units(ABOUT, ENTITIES, TEXTS)
    return links


def _walk(
    links: EntityLinks,
    config: HopConfig,
    *,
    alive: npt.NDArray[np.bool_] | None = None,
    pool: dict[int, float] | None = None,
) -> tuple[dict[int, float], dict[int, object]]:
    cos = np.array([0.5, 0.2, 0.1, 0.3, 0.25])
    live = np.ones(len(TEXTS), dtype=bool) if alive is None else alive
    linked = links.live(links.link(QUERY), live)
    return links.propagate(
        linked,
        pool if pool is not None else {3: 0.3},
        config=config,
        alive=live,
        cosine=lambda rows: cos[rows],
    )


def test_link_takes_the_longest_names_and_skips_function_words() -> None:
    links = _links()
    linked = [links.names[e] for e in links.link("where is alpha song from, and the town?")]
    assert linked == ["alpha song"]
    assert links.link("the of a") == []
    assert [links.names[e] for e in links.link("nothing here", ["Carl Town"])] == ["carl town"]
    assert not is_nameable("the of")
    assert is_nameable("carl town")


def test_each_hop_reaches_one_link_further() -> None:
    links = _links()
    reached_by_hops = {}
    for hops in (0, 1, 2, 3):
        _, reached = _walk(links, HopConfig(link_hops=hops, hop_seeds=2, hub_discount=False))
        reached_by_hops[hops] = {u: r.hop for u, r in reached.items()}  # type: ignore[attr-defined]
    assert reached_by_hops[0] == {}
    assert reached_by_hops[1].get(0) == 1, "the song's own passage is about the query entity"
    assert 1 not in reached_by_hops[1]
    assert reached_by_hops[2].get(1) == 2, "the composer is named by the song's passage"
    assert 2 not in reached_by_hops[2]
    assert reached_by_hops[3].get(2) == 3, "the town is named by the composer's passage"
    assert 3 not in reached_by_hops[3], "an unrelated passage is never reached"


def test_scores_and_provenance_of_the_walk() -> None:
    links = _links()
    cfg = HopConfig(link_hops=2, hop_seeds=1, mention_bonus=0.0, hub_discount=False)
    cos, reached = _walk(links, cfg)
    assert cos[3] == 0.3, "candidates keep their given score"
    assert cos[1] == pytest.approx(0.2), "reached units get their cosine"
    song, composer = reached[0], reached[1]
    assert song.bonus == pytest.approx(cfg.link_bonus)  # type: ignore[attr-defined]
    assert composer.bonus == pytest.approx(cfg.hop_bonus)  # type: ignore[attr-defined]
    assert composer.via == ["bob composer"]  # type: ignore[attr-defined]
    # the mention link: the untitled note mentions the song, so it is reached on hop 1
    _, with_mentions = _walk(links, dataclasses.replace(cfg, mention_bonus=0.05))
    assert 4 in with_mentions
    assert with_mentions[4].bonus < cfg.link_bonus  # type: ignore[attr-defined]


def test_a_hub_lends_less_than_a_rare_name() -> None:
    links = EntityLinks()
    # five units name "Hub Town"; only the first names "Rare Person"
    titles = ["Start", "Hub Town", "Rare Person", "A", "B", "C"]
    ents = [["Hub Town", "Rare Person"], [], [], ["Hub Town"], ["Hub Town"], ["Hub Town"]]
    links.add_units([[t] for t in titles], ents, [f"{t}." for t in titles])
    cfg = HopConfig(link_hops=2, hop_seeds=1, mention_bonus=0.0)
    _, reached = links.propagate(
        links.link("what about start?"),
        {},
        config=cfg,
        alive=np.ones(6, dtype=bool),
        cosine=lambda rows: np.zeros(len(rows)),
    )
    assert reached[2].bonus > reached[1].bonus > 0, "specificity: log(N / mentions) / log(N)"
    assert reached[2].bonus == pytest.approx(cfg.hop_bonus * np.log(6 / 2) / np.log(6))


def test_dead_units_and_common_entities_are_not_followed() -> None:
    links = _links()
    alive = np.ones(len(TEXTS), dtype=bool)
    alive[1] = False
    _, reached = _walk(links, HopConfig(link_hops=3, hop_seeds=1), alive=alive)
    assert 1 not in reached, "a deleted unit is never reached"
    assert 2 not in reached, "the chain breaks at a deleted unit"
    alive[:] = False
    assert links.live(links.link(QUERY), alive) == []
    crowded = EntityLinks()
    crowded.add_units([["Alpha Song"]] * 3, [[]] * 3, ["x"] * 3)
    cfg = HopConfig(link_hops=1, link_max_df=2, mention_bonus=0.0)
    _, none = crowded.propagate(
        crowded.link(QUERY),
        {},
        config=cfg,
        alive=np.ones(3, dtype=bool),
        cosine=lambda rows: np.zeros(len(rows)),
    )
    assert none == {}, "an entity about more units than link_max_df says nothing"


def test_saved_links_round_trip_and_refuse_bad_files() -> None:
    links = _links()
    files = links_files(links)
    back = links_from_files(files)
    assert back.names == links.names
    assert back.to_arrays()[1].keys() == links.to_arrays()[1].keys()
    for key, arr in links.to_arrays()[1].items():
        assert np.array_equal(back.to_arrays()[1][key], arr)
    assert _walk(back, HopConfig())[0] == _walk(links, HopConfig())[0]
    bad = dict(files)
    bad["links_about_indices.npy"] = array_to_bytes(np.array([99], dtype=np.int64))
    with pytest.raises(ValueError, match=r"out of range|offsets"):
        links_from_files(bad)
    bad = dict(files)
    bad["links.json"] = b'{"names": 3}'
    with pytest.raises(ValueError, match="list of names"):
        links_from_files(bad)
    with pytest.raises(KeyError):
        links_from_files({k: v for k, v in files.items() if k != "links_entities_indptr.npy"})
    with pytest.raises(ValueError, match="1 about lists, 0 entity lists and 0 texts"):
        links.add_units([["a"]], [], [])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("link_hops", -1, "link_hops must be between 0 and 8"),
        ("hop_seeds", 0, "hop_seeds must be >= 1"),
        ("hop_bonus", -0.1, "must be finite and >= 0"),
        ("link_max_df", 0, "link_max_df and mention_max_df must be >= 1"),
        ("link_max_ngram", 0, "link_max_ngram must be between 1 and 12"),
    ],
)
def test_strategy_configs_check_the_hop_settings(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BridgeConfig(**{field: value})  # type: ignore[arg-type]


def test_links_loaded_from_arrays_grow_like_links_built_at_once() -> None:
    whole = EntityLinks()
    whole.add_units(ABOUT, ENTITIES, TEXTS)
    head = EntityLinks()
    head.add_units(ABOUT[:3], ENTITIES[:3], TEXTS[:3])
    loaded = links_from_files(links_files(head))  # the saved arrays, not Python lists
    loaded.add_units(ABOUT[3:], ENTITIES[3:], TEXTS[3:])
    assert loaded.names == whole.names
    assert loaded.num_units == whole.num_units
    for key, arr in whole.to_arrays()[1].items():
        assert np.array_equal(loaded.to_arrays()[1][key], arr), key
    for e in range(len(whole.names)):  # the entity -> unit lists computed at load, then grown
        assert loaded._about[e] == whole._about[e]
        assert loaded._mentions[e] == whole._mentions[e]
        assert loaded._mentions.size(e) == len(whole._mentions[e])
    assert _walk(loaded, HopConfig()) == _walk(whole, HopConfig())


def test_links_saved_without_their_entity_lists_compute_them() -> None:
    links = _links()
    files = links_files(links)
    assert "links_mentions_units_indptr.npy" in files
    older = {k: v for k, v in files.items() if "_units_" not in k}  # saved before they were
    for back in (links_from_files(files), links_from_files(older)):
        for e in range(len(links.names)):
            assert back._about[e] == links._about[e]
            assert back._mentions[e] == links._mentions[e]
    bad = dict(files)
    bad["links_about_units_indices.npy"] = array_to_bytes(np.full(2, 99, dtype=np.int64))
    with pytest.raises(ValueError, match="about_units"):
        links_from_files(bad)


def test_a_long_document_counts_once_and_lends_its_best_units() -> None:
    # one report of six units, all about "Acme Report"; two short notes about "Beta Note"
    about = [["Acme Report"]] * 6 + [["Beta Note"], ["Beta Note"]]
    texts = [f"part {i} of the acme report" if i != 4 else "x" for i in range(6)] + ["b", "c"]
    groups = ["report"] * 6 + ["note-1", "note-2"]
    links = EntityLinks()
    links.add_units(about, [[]] * 8, texts, groups=groups)
    cos = np.array([0.1, 0.2, 0.6, 0.3, 0.9, 0.4, 0.5, 0.5])
    cfg = HopConfig(link_hops=1, link_max_df=1, about_per_document=2, mention_bonus=0.0)
    _, reached = links.propagate(
        links.link("what does the acme report say?"),
        {},
        config=cfg,
        alive=np.ones(8, dtype=bool),
        cosine=lambda rows: cos[rows],
    )
    # six units but one document: within link_max_df = 1; the two best units that name it
    assert sorted(reached) == [2, 5], "units naming the subject first, then by cosine"
    _, none = links.propagate(
        links.link("what about beta note?"),
        {},
        config=cfg,
        alive=np.ones(8, dtype=bool),
        cosine=lambda rows: cos[rows],
    )
    assert none == {}, "two documents are about 'beta note': more than link_max_df"
    back = links_from_files(links_files(links))  # the groups are saved with the links
    assert np.array_equal(back._unit_group, links._unit_group)
    assert back._about_groups == links._about_groups


def test_a_query_name_nothing_is_about_reaches_its_best_mention() -> None:
    links = EntityLinks()
    links.add_units([[], [], []], [["Dana Reyes"], ["Dana Reyes"], []], ["Dana Reyes leads.", "Dana.", "x"])
    cos = np.array([0.2, 0.4, 0.9])
    alive = np.ones(3, dtype=bool)

    def walk(cfg: HopConfig) -> dict[int, object]:
        return links.propagate(
            links.link("who is dana reyes?"), {}, config=cfg, alive=alive, cosine=lambda r: cos[r]
        )[1]

    reached = walk(HopConfig(link_hops=1, mention_bonus=0.0, mention_follow=1))
    assert list(reached) == [1], "the mentioning unit closest to the query"
    assert reached[1].bonus == pytest.approx(0.3 * np.log(3 / 2) / np.log(3))  # type: ignore[attr-defined]
    assert walk(HopConfig(link_hops=1, mention_bonus=0.0, mention_follow=0)) == {}


def test_a_confident_dense_hit_stays_in_the_results() -> None:
    def keep(order: list[int], dense: list[tuple[int, float]], k: int) -> list[int]:
        return keep_confident(order, confident_units(dense), k)

    dense = [(9, 0.9), (1, 0.3), (2, 0.29), (3, 0.28), (4, 0.27), (5, 0.26)]
    assert keep([1, 2, 3], dense, 3) == [1, 2, 9], "it takes the last place"
    assert keep([9, 2, 3], dense, 3) == [9, 2, 3]
    flat = [(9, 0.31), (1, 0.3), (2, 0.29), (3, 0.28), (4, 0.27), (5, 0.26)]
    assert keep([1, 2, 3], flat, 3) == [1, 2, 3], "a flat list is not confident"
    assert keep([1, 2, 3], dense[:4], 3) == [1, 2, 3], "too few hits to judge"
    assert keep([1], dense, 3) == [1, 9]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("march 2017", True),
        ("throughout 2018", True),
        ("$50 million", True),
        ("the first", True),
        ("q3", True),
        ("12.5%", True),
        ("acme corp", False),
        ("route 66", False),
        ("2017 annual report", False),
    ],
)
def test_values_are_never_nameable(name: str, value: bool) -> None:
    from core.text import is_value_phrase

    assert is_value_phrase(name) is value
    assert is_nameable(name) is not value


def test_a_name_every_document_uses_is_common_however_long_one_document_is() -> None:
    # one long report names "acme corp" in every unit; five short notes each name "annual report"
    about = [["Acme Corp"]] * 6 + [[f"Note {i}"] for i in range(5)] + [[]] * 9
    entities = [["Annual Report"]] + [[]] * 19
    texts = ["acme corp unit"] * 6 + [f"note {i} of the annual report" for i in range(5)] + ["x"] * 9
    groups = ["report"] * 6 + [f"note-{i}" for i in range(5)] + [f"other-{i}" for i in range(9)]
    links = EntityLinks()
    links.add_units(about, entities, texts, groups=groups)
    cfg = HopConfig(mention_max_df=2, common_share=0.1)  # common: named by more than 2 documents
    alive = np.ones(20, dtype=bool)
    acme, annual = links.vocab["acme corp"], links.vocab["annual report"]
    assert links._named_docs[acme] == 1
    assert links._named_docs[annual] == 6
    subjects = links.subject_units([acme, annual], alive, cfg)
    assert subjects == {"acme corp": list(range(6))}, "a name six documents use is no subject"
    back = links_from_files(links_files(links))
    assert back._named_docs == links._named_docs


def test_cover_named_brings_each_named_subject_into_the_top_k() -> None:
    from core.strategies.entity_links import cover_named

    order = [0, 1, 2, 9, 3, 4, 5]  # units 0-2 about A, 3-5 about B, 9 about neither
    a, b = [0, 1, 2], [3, 4, 5]
    assert cover_named(order, [a, b], 3) == [0, 3, 1], "B's best comes before A's second"
    assert cover_named(order, [a, b], 7) == [0, 3, 1, 2, 9, 4, 5]
    for k in range(1, 8):  # every prefix is the shorter query's answer
        assert cover_named(order, [a, b], k) == cover_named(order, [a, b], 7)[:k]
    assert cover_named([9, 0, 1, 3], [a, b], 3) == [9, 0, 3], "units of no group keep their place"
    assert cover_named(order, [a], 3) == [0, 1, 2], "one named subject: nothing to balance"
    assert cover_named(order, [a, [7]], 3) == [0, 1, 2], "no candidate for the second one"
    assert cover_named([0, 3, 1], [[0, 1], [1, 3]], 3) == [0, 3, 1], "a unit of both counts for both"


def test_every_confident_direct_match_keeps_a_place() -> None:
    direct = [(7, 0.95), (8, 0.93), *((u, 0.30 + 0.001 * u) for u in range(20))]
    assert confident_units(direct) == [7, 8]
    assert confident_units(direct[:4]) == [], "too short a list to judge"
    assert confident_units(direct, z=float("inf")) == []
    assert keep_confident([1, 2, 3, 4], [7, 8], 4) == [1, 2, 7, 8], "moved down, not out"
    assert keep_confident([1, 8, 3, 4], [7, 8], 4) == [1, 8, 3, 7]
    assert keep_confident([1], [7], 3) == [1, 7]
    assert keep_confident([7, 8], [7, 8, 9], 2) == [7, 8], "all confident: none dropped"
