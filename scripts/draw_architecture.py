"""Draw docs/img/architecture.png from the code: memjax's floors (tests/unit/test_layering.py STAGES), the four paper
folders on the systems floor, and the imports between them, parsed from every module.

  python scripts/draw_architecture.py [--out docs/img/architecture.png]

Each box is a unit of tests/unit/test_layering.py (a top-level package or module of memjax; a paper's folder is its own
box); an arrow is "imports", drawn once per pair of boxes, paper folders' arrows in the paper's colour. Writes a PNG
(matplotlib, Agg) and prints the per-paper counts: files in the folder, shared units it imports.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.unit.test_layering import PAPERS, ROOT as PKG, STAGES, _imports, _paper, _unit  # noqa: E402

COLOURS = {"memagent": "#1f77b4", "sumer": "#2ca02c", "memory_r1": "#d62728", "memory_r2": "#9467bd"}


def box_of(parts: list[str]) -> str:
    return f"systems/{_paper(parts)}" if _paper(parts) else _unit(parts)


def graph() -> tuple[dict[str, int], set[tuple[str, str]], dict[str, int]]:
    """(box -> floor, import edges between boxes, paper -> its number of .py files)."""
    floors = {u: s for u, s in STAGES.items() if u != "memjax"}
    floors.update({f"systems/{p}": STAGES["systems"] for p in PAPERS})
    edges, files = set(), defaultdict(int)
    for path in sorted(PKG.rglob("*.py")):
        rel = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if _paper(rel):
            files[_paper(rel)] += 1
        for src, dst, _ in _imports(path):
            a, b = box_of(src), box_of(dst)
            if a != b and a in floors and b in floors:
                edges.add((a, b))
    return floors, edges, dict(files)


def draw(out: Path) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    floors, edges, files = graph()
    rows = defaultdict(list)
    for box, f in sorted(floors.items(), key=lambda kv: (kv[1], kv[0])):
        rows[f].append(box)
    pos = {}
    for f, boxes in rows.items():
        for i, b in enumerate(boxes):
            pos[b] = ((i + 0.5) / len(boxes), f)
    fig, ax = plt.subplots(figsize=(15, 8.5))
    for a, b in sorted(edges):
        (x0, y0), (x1, y1) = pos[a], pos[b]
        p = a.split("/")[1] if a.startswith("systems/") else None
        ax.annotate("", xy=(x1, y1 + 0.18), xytext=(x0, y0 - 0.18),
                    arrowprops=dict(arrowstyle="->", lw=0.9 if p else 0.5, alpha=0.75 if p else 0.25,
                                    color=COLOURS.get(p, "0.4"), shrinkA=0, shrinkB=0))
    for b, (x, y) in pos.items():
        p = b.split("/")[1] if b.startswith("systems/") else None
        ax.text(x, y, b + (f"\n({files[p]} files)" if p else ""), ha="center", va="center", fontsize=8.5,
                bbox=dict(boxstyle="round,pad=0.35", fc=COLOURS[p] if p else "white", ec="0.3",
                          alpha=0.9 if p else 1.0), color="white" if p else "black", zorder=3)
    names = {0: "0 leaves & formats", 1: "1 model, data", 2: "2 checkpoint", 3: "3 engine, memory",
             4: "4 agents driver, evaluation", 5: "5 rl", 6: "6 systems (paper folders)", 7: "7 CLIs"}
    for f in rows:
        ax.text(-0.02, f, names.get(f, str(f)), ha="right", va="center", fontsize=9, style="italic")
        ax.axhline(f, color="0.92", lw=10, zorder=0)
    ax.set_xlim(-0.2, 1.02)
    ax.set_ylim(-0.6, max(rows) + 0.6)
    ax.axis("off")
    ax.set_title("memjax import floors (arrows: imports, from tests/unit/test_layering.py's parser); "
                 "a paper's folder imports shared floors only", fontsize=10)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    shared = {p: sorted({b for a, b in edges if a == f"systems/{p}"}) for p in PAPERS}
    return {"files": files, "imports": shared}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "architecture.png")
    a = ap.parse_args(argv)
    info = draw(a.out)
    for p in PAPERS:
        print(f"{p}: {info['files'][p]} files in memjax/systems/{p}/; imports {', '.join(info['imports'][p])}")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
