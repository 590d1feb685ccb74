"""Log-log chart frame shared by the bench report scripts (plain SVG text,
no dependencies): decade ticks, grid, axis labels, and the value-to-pixel
mappings for the points the caller draws."""
import math


def decades(lo, hi):
    """The decade exponents that enclose [lo, hi] (at least one decade)."""
    a = math.floor(math.log10(lo))
    b = math.ceil(math.log10(hi))
    if a == b:
        b += 1
    return a, b


def tick_label(e):
    v = 10.0**e
    return f"{v:g}" if 1e-3 <= v < 1e6 else f"1e{e}"


class Frame:
    """A plot area of `size` = (W, H) pixels with `margins` = (L, R, T, B),
    spanning the decades around `xs` and `ys`."""

    def __init__(self, size, margins, xs, ys):
        self.W, self.H = size
        self.L, self.R, self.T, self.B = margins
        self.x0, self.x1 = decades(min(xs), max(xs))
        self.y0, self.y1 = decades(min(ys), max(ys))

    def X(self, v):
        return self.L + (math.log10(v) - self.x0) / (self.x1 - self.x0) * (self.W - self.L - self.R)

    def Y(self, v):
        return self.H - self.B - (math.log10(v) - self.y0) / (self.y1 - self.y0) * (self.H - self.T - self.B)

    def open(self, title, xlabel, ylabel, font_size=12):
        """The SVG's opening elements: background, title, grid, box, labels."""
        W, H, L, R, T, B = self.W, self.H, self.L, self.R, self.T, self.B
        o = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="{font_size}">',
            f'<rect width="{W}" height="{H}" fill="white"/>',
            f'<text x="{L}" y="22" font-size="15" font-weight="bold">{title}</text>',
        ]
        for e in range(self.x0, self.x1 + 1):
            x = self.X(10.0**e)
            o.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H - B}" stroke="#ddd"/>')
            o.append(f'<text x="{x:.1f}" y="{H - B + 16}" text-anchor="middle">{tick_label(e)}</text>')
        for e in range(self.y0, self.y1 + 1):
            y = self.Y(10.0**e)
            o.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
            o.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{tick_label(e)}</text>')
        o.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#333"/>')
        o.append(f'<text x="{(L + W - R) / 2:.0f}" y="{H - 20}" text-anchor="middle">{xlabel}</text>')
        mid = (T + H - B) / 2
        o.append(f'<text x="18" y="{mid:.0f}" text-anchor="middle" transform="rotate(-90 18 {mid:.0f})">{ylabel}</text>')
        return o
