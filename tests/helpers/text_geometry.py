"""Where a chart's words land, measured in Chromium: every ``<text>`` of an SVG drawing as the
polygon its ink covers (rotation included), and the pairs that collide or leave the drawing.

A text's box from ``getBBox`` is the line box (the font's ascent and descent, wider than the
ink); a sixth of its height is taken off above and below, so labels set at the font's own step
do not count as touching, while two that share ink do. Rotated labels are compared as rotated
rectangles (separating axes), never as their axis-aligned boxes, which overlap for any close
labels set at an angle.
"""

from __future__ import annotations

# in the page: every visible text of the first <svg>, as four corners in the drawing's pixels
TEXT_CORNERS = """() => {
  const svg = document.querySelector('svg');
  const frame = svg.getBoundingClientRect();
  const found = [];
  for (const text of svg.querySelectorAll('text')) {
    if (!text.textContent.trim()) continue;
    let shown = true;
    for (let e = text; e && e !== svg; e = e.parentElement) {
      if (e.getAttribute('opacity') === '0' || e.getAttribute('display') === 'none') shown = false;
    }
    if (!shown) continue;
    const box = text.getBBox(), matrix = text.getScreenCTM();
    const pad = box.height / 6;
    const top = box.y + pad, bottom = box.y + box.height - pad, right = box.x + box.width;
    const corners = [[box.x, top], [right, top], [right, bottom], [box.x, bottom]]
      .map(([x, y]) => {
        const p = new DOMPoint(x, y).matrixTransform(matrix);
        return [p.x - frame.left, p.y - frame.top];
      });
    found.push({text: text.textContent, role: text.parentElement.getAttribute('class') || '',
                corners});
  }
  return {width: frame.width, height: frame.height, texts: found};
}"""


def overlap_depth(p: list, q: list) -> float:
    """How deep two convex polygons overlap along the axis that best separates them (<= 0:
    they are apart)."""
    depth = float("inf")
    for poly in (p, q):
        for (x1, y1), (x2, y2) in zip(poly, poly[1:] + poly[:1], strict=True):
            nx, ny = y2 - y1, x1 - x2
            norm = (nx * nx + ny * ny) ** 0.5 or 1.0
            a = [(x * nx + y * ny) / norm for x, y in p]
            b = [(x * nx + y * ny) / norm for x, y in q]
            depth = min(depth, min(max(a), max(b)) - max(min(a), min(b)))
    return depth


def text_clashes(drawing: dict, slack: float = 1.0) -> list[str]:
    """What is wrong with the words of ``drawing`` (from :data:`TEXT_CORNERS`): texts that
    share more than ``slack`` px of ink, and texts cut by the drawing's edge."""
    found = []
    texts = drawing["texts"]
    bounds = []
    for item in texts:
        xs = [x for x, _ in item["corners"]]
        ys = [y for _, y in item["corners"]]
        bounds.append((min(xs), min(ys), max(xs), max(ys)))
    for i, (item, (x0, y0, x1, y1)) in enumerate(zip(texts, bounds, strict=True)):
        if (
            x0 < -slack
            or y0 < -slack
            or x1 > drawing["width"] + slack
            or y1 > drawing["height"] + slack
        ):
            found.append(f"{item['text']!r} ({item['role']}) is cut by the edge")
        for other, (u0, v0, u1, v1) in zip(texts[i + 1 :], bounds[i + 1 :], strict=True):
            if u0 > x1 or x0 > u1 or v0 > y1 or y0 > v1:
                continue  # their boxes are apart: no need for the exact test
            depth = overlap_depth(item["corners"], other["corners"])
            if depth > slack:
                found.append(
                    f"{item['text']!r} ({item['role']}) and {other['text']!r} "
                    f"({other['role']}) overlap by {depth:.1f} px"
                )
    return found
