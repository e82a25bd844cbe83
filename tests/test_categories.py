"""The Arena's board around the fit, against FastChat's own procedure written as loops.

The oracles follow ``fastchat/serve/monitor/elo_analysis.py``'s
``report_elo_analysis_results`` (a category's filter first, then the time sort,
``anony``, ``exclude_tie``, ``limit_user_votes`` with its ``groupby("judge").head``
per date) and its ``leaderboard_table_df``, in pandas as FastChat writes them,
the day taken by ``datetime.fromtimestamp`` in a named zone instead of the
machine's. Nothing in them shares code with :mod:`lbnorm.ratings.categories`.
"""

from __future__ import annotations

import json
import re
import zoneinfo
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbnorm.arena import ArenaOptions, rate_battles
from lbnorm.cli import main
from lbnorm.core.errors import OptionsError
from lbnorm.ratings import RatingOptions
from lbnorm.ratings.categories import daily_vote_cap, vote_days

STYLE = Path(__file__).parent / "fixtures" / "battles" / "clean_battle_style.json"
MATH = "category_tag.math_v0.1.math"

Record = dict[str, Any]


def fastchat_selection(
    records: list[Record],
    *,
    category: Callable[[Record], bool] = lambda record: True,
    exclude_tie: bool = False,
    cap: int | None = None,
    zone: str = "UTC",
) -> pd.DataFrame:
    """The battles ``report_elo_analysis_results`` rates, in its order of steps."""
    battles = pd.DataFrame([r for r in records if category(r)])
    # FastChat sorts with quicksort; stable here, lbnorm's rule for equal times
    battles = battles.sort_values(ascending=True, by=["tstamp"], kind="stable")
    battles = battles[battles["anony"]].reset_index(drop=True)
    if exclude_tie:
        battles = battles[~battles["winner"].str.contains("tie")]
    if cap is not None:  # limit_user_votes, the day in `zone`
        tz = zoneinfo.ZoneInfo(zone)
        battles = battles.assign(
            date=[
                datetime.fromtimestamp(t, tz).strftime("%Y-%m-%d")
                for t in battles["tstamp"]
            ]
        )
        kept = pd.DataFrame()
        for date in battles["date"].unique():
            today = battles[battles["date"] == date]
            kept = pd.concat([kept, today.groupby("judge").head(cap)])
        battles = kept
    return battles


def num_battles(battles: pd.DataFrame) -> dict[str, int]:
    """``leaderboard_table_df``'s ``num_battles``."""
    counts = (
        battles["model_a"]
        .value_counts()
        .add(battles["model_b"].value_counts(), fill_value=0)
    )
    return {str(k): int(v) for k, v in counts.items()}


def _rated_alone(battles: pd.DataFrame, tmp_path: Path, options: RatingOptions) -> Any:
    """The oracle's battles rated by themselves, no filter and no cap."""
    path = tmp_path / f"alone-{len(list(tmp_path.iterdir()))}.json"
    columns = ["model_a", "model_b", "winner", "judge", "tstamp"]
    path.write_text(json.dumps(battles[columns].to_dict(orient="records")))
    return rate_battles([path], options=ArenaOptions(rating=options)).ratings


@pytest.mark.parametrize("ties", ["half", "drop"])
@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles"])
def test_the_cap_runs_in_fastchats_order_within_each_category(
    tmp_path: Path, ties: str, zone: str
) -> None:
    records = json.loads(STYLE.read_text())
    rating = RatingOptions(ties=ties)  # type: ignore[arg-type]
    options = ArenaOptions(
        rating=rating,
        anony_only=True,
        daily_vote_per_user=3,
        vote_day_tz=zone,
        categories=(("math", MATH),),
    )
    result = rate_battles([STYLE], options=options, out=tmp_path / "o")
    board = pq.read_table(tmp_path / "o" / "categories.parquet").to_pandas()
    exclude = ties == "drop"
    for name, category in (
        ("overall", lambda r: True),
        ("math", lambda r: r["category_tag"]["math_v0.1"]["math"]),
    ):
        expected = fastchat_selection(
            records, category=category, exclude_tie=exclude, cap=3, zone=zone
        )
        block = board[board["category"] == name].set_index("model")
        assert block["num_battles"].to_dict() == num_battles(expected)
        alone = _rated_alone(expected, tmp_path, rating)
        got = block["rating"].reindex(alone.models).to_numpy()
        np.testing.assert_allclose(got, alone.rating, rtol=0, atol=1e-9)
    overall = fastchat_selection(records, exclude_tie=exclude, cap=3, zone=zone)
    capped = result.battles.outcome != 1 if exclude else slice(None)
    assert int(result.battles.count[capped].sum()) == len(overall)


def test_the_old_order_differs_and_a_zone_moves_the_day(tmp_path: Path) -> None:
    """Capping before the category keeps fewer math votes; Pacific days split the fixture."""
    records = json.loads(STYLE.read_text())
    math = fastchat_selection(
        records, category=lambda r: r["category_tag"]["math_v0.1"]["math"], cap=3
    )
    capped_first = fastchat_selection(records, cap=3)
    before = capped_first[
        [bool(t["math_v0.1"]["math"]) for t in capped_first["category_tag"]]
    ]
    assert len(before) < len(math)
    utc = fastchat_selection(records, cap=3)
    pacific = fastchat_selection(records, cap=3, zone="America/Los_Angeles")
    assert len(utc) < len(pacific)  # 00:00-11:00 UTC is two days in California


ZONES = [
    "America/Los_Angeles",
    "Europe/London",
    "Australia/Lord_Howe",  # a 30-minute daylight-saving shift
    "Asia/Kathmandu",  # +05:45
    "Pacific/Chatham",  # +12:45 / +13:45
    "UTC",
]


@given(
    seconds=st.lists(
        st.floats(1.6e9, 1.8e9, allow_nan=False) | st.integers(int(1.6e9), int(1.8e9)),
        min_size=1,
        max_size=40,
    ),
    zone=st.sampled_from(ZONES),
)
def test_vote_days_are_the_calendar_days_of_the_zone(
    seconds: list[float], zone: str
) -> None:
    tstamp = np.array(seconds, dtype=np.float64)
    tz = zoneinfo.ZoneInfo(zone)
    epoch = datetime(1970, 1, 1).date()
    expected = [(datetime.fromtimestamp(t, tz).date() - epoch).days for t in tstamp]
    assert vote_days(tstamp, zone).tolist() == expected


@pytest.mark.parametrize("zone", ["America/Los_Angeles", "Europe/London"])
def test_vote_days_across_each_transition_second(zone: str) -> None:
    """Every second around 2024's two daylight-saving changes, and 2 days beside them."""
    tz = zoneinfo.ZoneInfo(zone)
    changes = [
        t
        for t in range(1_704_067_200, 1_735_689_600, 3600)
        if datetime.fromtimestamp(t, tz).utcoffset()
        != datetime.fromtimestamp(t + 3600, tz).utcoffset()
    ]
    assert len(changes) == 2
    tstamp = np.concatenate(
        [np.arange(t - 7200, t + 10800, 0.5) for t in changes]
        + [np.arange(changes[0], changes[0] + 2 * 86_400, 600.0)]
    )
    epoch = datetime(1970, 1, 1).date()
    expected = [(datetime.fromtimestamp(t, tz).date() - epoch).days for t in tstamp]
    assert vote_days(tstamp, zone).tolist() == expected
    # a time a hair before midnight is midnight to datetime (microseconds, rounded)
    hair = np.array([1_799_999_999.9999998, 1_799_971_199.9999993])
    assert vote_days(hair, "America/Los_Angeles").tolist() == [
        (
            datetime.fromtimestamp(t, zoneinfo.ZoneInfo("America/Los_Angeles")).date()
            - epoch
        ).days
        for t in hair
    ]
    no_time = vote_days(np.array([np.nan, 1.7e9]), zone)
    assert np.isnan(no_time[0])
    assert not np.isnan(no_time[1])


@given(
    votes=st.lists(
        st.tuples(
            st.integers(-1, 3), st.floats(1.7e9, 1.7e9 + 5 * 86_400) | st.just(np.nan)
        ),
        max_size=60,
    ),
    cap=st.integers(1, 4),
    zone=st.sampled_from(ZONES),
)
def test_daily_vote_cap_against_a_loop(
    votes: list[tuple[int, float]], cap: int, zone: str
) -> None:
    judge = np.array([j for j, _ in votes], dtype=np.int64)
    tstamp = np.array([t for _, t in votes], dtype=np.float64)
    tz = zoneinfo.ZoneInfo(zone)
    seen: dict[tuple[int, str], int] = {}
    expected = [True] * len(votes)  # no judge or no time: kept
    timed = [i for i, (j, t) in enumerate(votes) if j >= 0 and t == t]
    for i in sorted(timed, key=lambda i: (votes[i][1], i)):
        key = (votes[i][0], datetime.fromtimestamp(votes[i][1], tz).strftime("%F"))
        seen[key] = seen.get(key, 0) + 1
        expected[i] = seen[key] <= cap
    assert daily_vote_cap(judge, tstamp, cap, zone=zone).tolist() == expected


def test_an_unknown_zone_and_a_missing_database_are_usage_errors(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(
        OptionsError,
        match=r"'America/LosAngeles' is not a time zone.*Did you mean America/Los_Angeles.*\nHint: give an IANA name",
    ):
        ArenaOptions(daily_vote_per_user=5, vote_day_tz="America/LosAngeles")
    with pytest.raises(
        OptionsError, match=r"sets the day of --daily-vote-per-user.*\nHint: give both"
    ):
        ArenaOptions(vote_day_tz="America/Los_Angeles")

    def missing(key: str) -> zoneinfo.ZoneInfo:
        raise zoneinfo.ZoneInfoNotFoundError(key)

    monkeypatch.setattr(zoneinfo, "ZoneInfo", missing)
    monkeypatch.setattr(zoneinfo, "available_timezones", set)
    with pytest.raises(
        OptionsError,
        match=r"no time zone database.*\nHint: install one \(pip install tzdata",
    ):
        ArenaOptions(daily_vote_per_user=5, vote_day_tz="America/Los_Angeles")
    # UTC needs no database
    assert ArenaOptions(daily_vote_per_user=5).vote_day_tz == "UTC"
    code = main(
        [
            "arena",
            str(STYLE),
            "--daily-vote-per-user",
            "5",
            "--vote-day-tz",
            "Mars/Olympus",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2
    assert "no time zone database" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_zone_is_recorded_only_when_named(tmp_path: Path) -> None:
    options = ArenaOptions(daily_vote_per_user=5, vote_day_tz="America/Los_Angeles")
    assert options.to_manifest()["vote_day_tz"] == "America/Los_Angeles"
    assert "vote_day_tz" not in ArenaOptions(daily_vote_per_user=5).to_manifest()
    rate_battles([STYLE], options=options, out=tmp_path / "o")
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["options"]["vote_day_tz"] == "America/Los_Angeles"
    assert manifest["counts"]["over_daily_vote_cap"] > 0


# --- leaderboard.parquet against leaderboard_table_df ---------------------------------------


def fastchat_table(
    battles: pd.DataFrame, rating: pd.Series, samples: pd.DataFrame
) -> pd.DataFrame:
    """``leaderboard_table_df`` as ``report_elo_analysis_results`` builds it."""
    q025, q975 = samples.quantile(0.025), samples.quantile(0.975)
    ranking = {}
    for a in rating.index:
        ranking[a] = 1
        for b in rating.index:
            if a != b and q025[b] > q975[a]:
                ranking[a] += 1
    return pd.DataFrame(
        {
            "rating": rating,
            "variance": samples.var(),
            "rating_q975": q975,
            "rating_q025": q025,
            "num_battles": pd.Series(num_battles(battles)),
            "final_ranking": pd.Series(ranking),
        }
    )


@pytest.mark.parametrize("ties", ["half", "drop"])
def test_the_arena_table_is_leaderboard_table_df(tmp_path: Path, ties: str) -> None:
    records = json.loads(STYLE.read_text())
    options = ArenaOptions(
        rating=RatingOptions(ties=ties, bootstrap=100),  # type: ignore[arg-type]
        anony_only=True,
        arena_tables=True,
    )
    result = rate_battles([STYLE], options=options, out=tmp_path / "o")
    got = pq.read_table(tmp_path / "o" / "leaderboard.parquet").to_pandas()
    models = result.ratings.models.tolist()
    assert result.ratings.samples is not None
    expected = fastchat_table(
        fastchat_selection(records, exclude_tie=ties == "drop"),
        pd.Series(result.ratings.rating, index=models),
        pd.DataFrame(result.ratings.samples, columns=models),
    )
    assert list(got.columns) == ["model", *expected.columns]
    got = got.set_index("model").loc[models]
    pd.testing.assert_frame_equal(
        got, expected.loc[models], check_dtype=False, check_names=False, atol=1e-9
    )
    ratings = pq.read_table(tmp_path / "o" / "ratings.parquet").to_pandas()
    if ties == "drop":  # fitted battles: the ties are not counted
        played = ratings.set_index("model")["n_battles"].loc[models]
        assert (got["num_battles"] < played).all()


def _one_sided(tmp_path: Path) -> Path:
    """Battles where `champ` lost once in 16: some bootstrap rounds see no loss."""
    rng = np.random.default_rng(3)
    others = ["a", "b", "c", "d"]
    rows = [
        {"model_a": "champ", "model_b": str(rng.choice(others)), "winner": "model_a"}
        for _ in range(15)
    ]
    rows.append({"model_a": "champ", "model_b": "a", "winner": "model_b"})
    for _ in range(200):
        a, b = rng.choice(others, size=2, replace=False)
        rows.append({"model_a": str(a), "model_b": str(b), "winner": "model_a"})
        rows.append({"model_a": str(b), "model_b": str(a), "winner": "model_a"})
    path = tmp_path / "one_sided.json"
    path.write_text(json.dumps(rows))
    return path


def test_an_open_interval_is_inf_with_an_infinite_variance(tmp_path: Path) -> None:
    options = ArenaOptions(rating=RatingOptions(bootstrap=200), arena_tables=True)
    rate_battles([_one_sided(tmp_path)], options=options, out=tmp_path / "o")
    table = pq.read_table(tmp_path / "o" / "leaderboard.parquet").to_pandas()
    champ = table.set_index("model").loc["champ"]
    assert champ["rating_q975"] == np.inf
    assert champ["variance"] == np.inf
    # the Arena's table code cannot print it: round(inf) raises
    with pytest.raises(OverflowError, match="infinity"):
        round(champ["rating_q975"] - champ["rating"])
    others = table[table["model"] != "champ"]
    assert np.isfinite(others[["variance", "rating_q975", "rating_q025"]]).all().all()


# --- categories that cannot be rated --------------------------------------------------------


def test_a_sparse_category_is_named_and_the_others_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    code = main(
        [
            "arena",
            str(STYLE),
            "--bootstrap",
            "50",
            "--category",
            "math=" + MATH,
            "--category",
            "tiny=tstamp < 1717200200",  # 5 battles: models that never lost
            "--category",
            "klingon=language = 'Klingon'",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    assert (
        "categories 2 not rated, left out of categories.parquet: tiny, klingon"
        in captured.out
    )
    assert re.search(
        r"warning: category_not_rated: --category tiny: not rated, .*diverge",
        captured.err,
    )
    assert "--category klingon: not rated" in captured.err
    table = pq.read_table(out / "categories.parquet").to_pylist()
    assert {row["category"] for row in table} == {"overall", "math"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert [c["category"] for c in manifest["categories_not_rated"]] == [
        "tiny",
        "klingon",
    ]
    assert "never lost" in manifest["categories_not_rated"][0]["reason"]
    codes = [w["code"] for w in manifest["warnings"]]
    assert codes.count("category_not_rated") == 2


def test_a_categorys_bootstrap_warnings_reach_the_manifest(tmp_path: Path) -> None:
    path = _one_sided(tmp_path)
    rows = json.loads(path.read_text())
    for row in rows:
        row["part"] = "x"
    path.write_text(json.dumps(rows))
    options = ArenaOptions(
        rating=RatingOptions(bootstrap=100),
        categories=(("all", "part = 'x'"),),
    )
    result = rate_battles([path], options=options, out=tmp_path / "o")
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    overall = [(w.code, w.message) for w in result.ratings.warnings]
    assert any(code == "bootstrap_divergent" for code, _ in overall)
    # the category holds every battle: its warnings are the overall ones, named
    assert [(w["code"], w["message"]) for w in manifest["warnings"]] == [
        *overall,
        *((code, f"--category all: {message}") for code, message in overall),
    ]


def test_a_time_no_calendar_can_place_is_named() -> None:
    from lbnorm.core.errors import InputError

    with pytest.raises(
        InputError,
        match=r"1 battle\(s\) have a tstamp no calendar can place in America/Los_Angeles, "
        r"e\.g\. 1000000000000000 seconds .*\nHint: tstamp is seconds",
    ):
        vote_days(np.array([1.7e9, 1e15]), "America/Los_Angeles")
    assert vote_days(np.array([1e15]), "UTC").tolist() == [11574074074.0]  # no calendar
