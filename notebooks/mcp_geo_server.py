"""A small MCP server for notebooks/07_mcp.ipynb: city facts from a fixed table, so it runs offline.

Run by the notebook over stdio (``%agent mcp add geo -- python mcp_geo_server.py``). Written with the
official SDK's server side; any MCP server (from npm, PyPI or your own code) plugs in the same way.
"""

from __future__ import annotations

import math
import sys

from mcp.server.mcpserver import MCPServer

CITIES = {
    "Oslo": (59.9139, 10.7522, 717_710),
    "Bergen": (60.3913, 5.3221, 291_940),
    "Trondheim": (63.4305, 10.3951, 214_565),
    "Stockholm": (59.3293, 18.0686, 984_748),
}

app = MCPServer("geo")


def _city(name: str) -> tuple[float, float, int]:
    try:
        return CITIES[name]
    except KeyError:
        raise ValueError(f"unknown city {name!r}; known: {', '.join(CITIES)}") from None


@app.tool()
def distance_km(a: str, b: str) -> float:
    """Great-circle distance in kilometres between two cities."""
    (lat1, lon1, _), (lat2, lon2, _) = _city(a), _city(b)
    p1, p2, dp, dl = map(math.radians, (lat1, lat2, lat2 - lat1, lon2 - lon1))
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    km = 2 * 6371.0 * math.asin(math.sqrt(h))
    print(f"distance_km({a}, {b}) = {km:.1f}", file=sys.stderr)  # logs go to stderr, never to the kernel
    return round(km, 1)


@app.tool()
def population(city: str) -> int:
    """Population of a city (municipality, 2024)."""
    return _city(city)[2]


if __name__ == "__main__":
    app.run()
