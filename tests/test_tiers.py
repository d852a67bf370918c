"""Three editions, each holding every tier up to its own, and a way in from every lock.

Canary sentences go into account-tier and premium-tier text; every pair of editions is then
compared byte for byte (decompressing gzip, zip, EPUB and Pagefind files): the public edition
holds neither kind, the account edition only the account kind, the member edition both.
Every locked page, card and path step of the public and account editions shows the offer
that site.yaml declares for its tier, with links that lead somewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from conftest import REPO, TEMPLATES, edit
from test_leaks import all_bytes

from curriculum.build import build

CAP = "content/courses/demo/capsules"
QUESTION = "content/questions/is-it-bound.md"


def plant(root: Path) -> tuple[list[str], list[str]]:
    """Account-tier and premium-tier canaries, planted in every field each tier withholds."""
    account = [f"amber walrus canary {i} hums beside copper kettles" for i in range(4)]
    premium = [f"zebra quartz canary {i} sings under violet lamps" for i in range(2)]
    edit(root, f"{CAP}/copy-kernel.md", "## Details\n", f"## Details\n\n{account[0]}.\n")
    edit(root, QUESTION, "access: premium", "access: account")
    edit(root, QUESTION, "far below the ridge", f"far below the ridge. {account[1]}. It is")
    edit(root, QUESTION, "Guesses without arithmetic.", account[2])
    edit(root, QUESTION, "Look for the ridge point stated with its units.", account[3])
    edit(root, f"{CAP}/tiling.md", "## The members part\n", f"## The members part\n\n{premium[0]}.\n")
    exp = "content/experiments/bound.md"
    edit(root, exp, "access: free", "access: premium")
    edit(root, exp, "The time is bytes over bandwidth.",
         f"The time is bytes over bandwidth.\n\n<!-- more -->\n\n{premium[1]}.")
    return account, premium


def holds(files: list[tuple[str, bytes]], canary: str) -> list[str]:
    needle = canary.encode()
    return [name for name, data in files if needle in data]


def test_each_edition_holds_its_tiers_and_nothing_above(sample: Path, tmp_path: Path) -> None:
    account, premium = plant(sample)
    build(sample, out_dir=tmp_path, templates=TEMPLATES, strict=True)
    editions = {e: all_bytes(tmp_path / e) for e in ("public", "account", "member")}
    for canary in account:
        assert holds(editions["public"], canary) == [], f"account text '{canary}' in public"
        assert holds(editions["account"], canary), f"'{canary}' missing from account"
        assert holds(editions["member"], canary), f"'{canary}' missing from member"
    for canary in premium:
        assert holds(editions["public"], canary) == [], f"premium text '{canary}' in public"
        assert holds(editions["account"], canary) == [], f"premium text '{canary}' in account"
        assert holds(editions["member"], canary), f"'{canary}' missing from member"
    # Positive controls: the search index and the EPUB of each edition carry what it may show.
    index = [(n, d) for n, d in editions["account"] if "/static/pagefind/" in n]
    assert holds(index, account[0]), "the account search index lacks the account capsule text"
    epub = [(n, d) for n, d in editions["account"] if ".epub!" in n]
    assert holds(epub, account[0]) and not holds(epub, premium[0])


def offers(root: Path) -> dict[str, dict[str, str]]:
    site = yaml.safe_load((root / "content/site.yaml").read_text(encoding="utf-8"))
    return {t["id"]: t["offer"] for t in site["tiers"] if "offer" in t}


def test_every_lock_shows_its_tiers_offer(sample: Path, tmp_path: Path) -> None:
    build(sample, out_dir=tmp_path, templates=TEMPLATES, strict=True)
    offer = offers(sample)
    seen: dict[str, int] = {"aside": 0, "badge": 0}
    for edition in ("public", "account"):
        folder = tmp_path / edition
        join = (folder / "join/index.html").read_text(encoding="utf-8")
        for tier, o in offer.items():
            assert f'id="tier-{tier}"' in join
            assert f'href="{o["join_url"]}"' in join and f'href="{o["sign_in_url"]}"' in join
        for page in sorted(folder.rglob("*.html")):
            html = page.read_text(encoding="utf-8")
            for aside in re.findall(r'<aside class="locked".*?</aside>', html, flags=re.S):
                seen["aside"] += 1
                tier = re.search(r'data-offer-join="([a-z-]+)"', aside)
                assert tier, f"{page}: a locked notice without an offer"
                o = offer[tier.group(1)]
                assert f'href="{o["join_url"]}"' in aside and o["join_label"] in aside
                assert f'href="{o["sign_in_url"]}"' in aside and o["price"] in aside
                assert f'join/index.html#tier-{tier.group(1)}"' in aside
            for badge in re.finditer(r'class="badge badge-locked"[^>]*>[^<]*</span>', html):
                seen["badge"] += 1
                after = html[badge.end():badge.end() + 300]
                link = re.match(r' <a class="offer-link" href="([^"]+)" data-offer="([a-z-]+)"', after)
                assert link, f"{page}: a locked badge without its offer link"
                target, _, frag = link.group(1).partition("#")
                assert (page.parent / target).resolve() == (folder / "join/index.html").resolve()
                assert frag == f"tier-{link.group(2)}" and offer[link.group(2)]["join_label"] in after
    assert seen["aside"] >= 3 and seen["badge"] >= 6, seen


def test_account_edition_opens_account_pages_only(sample: Path, tmp_path: Path) -> None:
    build(sample, out_dir=tmp_path, templates=TEMPLATES, strict=True)
    copy = (tmp_path / "account/courses/demo/copy-kernel/index.html").read_text(encoding="utf-8")
    assert "coalesced loads and stores" in copy and '<aside class="locked"' not in copy
    tiling = (tmp_path / "account/courses/demo/tiling/index.html").read_text(encoding="utf-8")
    assert "thirty-two" not in tiling and 'data-offer-join="premium"' in tiling
    public = (tmp_path / "public/courses/demo/copy-kernel/index.html").read_text(encoding="utf-8")
    assert "coalesced loads and stores" not in public and 'data-offer-join="account"' in public


def test_templates_and_generator_name_no_tier() -> None:
    """Tier ids, labels and order come from site.yaml; code and templates only read them."""
    tiers = [t["id"] for t in yaml.safe_load(
        (REPO / "content/site.yaml").read_text(encoding="utf-8"))["tiers"]]
    literal = re.compile("|".join(rf"""['"]{re.escape(t)}['"]""" for t in tiers))
    found = []
    for path in [*sorted(TEMPLATES.rglob("*.html")), *sorted(TEMPLATES.rglob("*.js")),
                 *sorted((REPO / "src/curriculum").glob("*.py"))]:
        if path.name == "models.py":  # field descriptions name example tiers
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if literal.search(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert found == []


def test_every_lock_of_the_shipped_site_offers_a_way_in() -> None:
    """Every locked notice and badge of this repository's public and account editions (every
    page kind, puzzles included) carries its tier's offer."""
    result = build(REPO, editions=["public", "account"], write=False)
    offer = offers(REPO)
    checked = 0
    for edition, out in result.outputs.items():
        for name, data in sorted(out.files.items()):
            if not name.endswith(".html"):
                continue
            html = data.decode("utf-8")
            for aside in re.findall(r'<aside class="locked".*?</aside>', html, flags=re.S):
                tier = re.search(r'data-offer-join="([a-z-]+)"', aside)
                assert tier, f"{edition}/{name}: a locked notice without an offer"
                assert f'href="{offer[tier.group(1)]["sign_in_url"]}"' in aside, name
                checked += 1
            for badge in re.finditer(r'class="badge badge-locked"[^>]*>[^<]*</span>', html):
                assert html[badge.end():].startswith(' <a class="offer-link"'), \
                    f"{edition}/{name}: a locked badge without its offer link"
                checked += 1
    assert checked > 100
