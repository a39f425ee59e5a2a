"""The evaluation's plot: improvement over -Oz vs samples, one line per method."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(data: dict[str, Any], path: str | Path) -> None:
    """Improvement over -Oz vs samples, one line per method (log x); SVG or PNG by the file suffix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"  # text stays text: a small SVG
    rows = data["results"]["rows"]
    samples = sorted({r["samples"] for r in rows})
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    colors = plt.get_cmap("tab10").colors
    for index, method in enumerate(dict.fromkeys(r["method"] for r in rows)):
        own = [r for r in rows if r["method"] == method]
        color = colors[index % len(colors)]
        if len(own) == 1:  # greedy and the autotuner: one answer, drawn across
            value = own[0]["improvement"]
            axis.axhline(value, color=color, linestyle=":", linewidth=1.2, label=f"{method} ({value:.2f}%)")
            continue
        x = [r["samples"] for r in own]
        axis.plot(x, [r["improvement"] for r in own], color=color, marker="o", markersize=3, label=method)
        axis.plot(x, [r["improvement_with_oz"] for r in own], color=color, linestyle="--", linewidth=0.8)
    axis.plot([], [], color="gray", linestyle="--", linewidth=0.8, label="dashed: with -Oz backup")
    axis.axhline(0, color="black", linewidth=0.6)
    axis.set_xscale("log")
    axis.set_xticks(samples, [str(n) for n in samples])
    axis.set_xlabel("samples n")
    axis.set_ylabel("improvement over -Oz [%]")
    axis.set_title(
        f"{data['meta']['model_id']} on {data['results']['functions']} {data['meta']['split']} functions"
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, metadata={"Date": None} if str(path).endswith(".svg") else None)
    plt.close(figure)
