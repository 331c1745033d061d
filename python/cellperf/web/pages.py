"""The shipped page set: three pages whose object counts, types and sizes follow seed 004
Table VI (Yahoo!, Star Wars, CNN as a local server held them in 2005), generated, not fetched.

Table VI gives per page the number of objects, each type's share of the bytes and the total
size. It does not say how many objects of each type there were: the split below is a
**choice** (one HTML document per page; a few style sheets and scripts where the table has
bytes of them; images make up the rest, GIF and JPEG in proportion to their bytes). Sizes
within a type are drawn from a seeded log-normal (σ = 0.8, a web page's usual spread) and
scaled so that each type's bytes match the table exactly.

Content is like the real thing where it matters to the link: HTML, CSS and JavaScript are
text from a small vocabulary (they compress about 3-5× with gzip, as web text does); images
are valid GIF and JPEG files padded with random bytes in comment blocks, so they do not
compress (004 §VI.A: "GIF and JPEG content are not further compressible"). Nothing refers
outside the page's folder.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

#: 004 Table VI: objects, share of bytes by type (%), total size (kB = 1000 B, as the table's
#: 102.4 kB for Yahoo!).
TABLE_VI = {
    "yahoo": (15, {"html": 77.7, "gif": 13.8, "jpeg": 8.4, "css": 0.0, "js": 0.0}, 102.4),
    "starwars": (70, {"html": 24.7, "gif": 46.2, "jpeg": 26.1, "css": 0.7, "js": 2.0}, 430.2),
    "cnn": (70, {"html": 28.4, "gif": 39.5, "jpeg": 17.6, "css": 14.4, "js": 0.0}, 178.1),
}
#: Objects of each text type (choice): style sheets and scripts by the page's bytes of them.
_TEXT_OBJECTS = {"yahoo": {"css": 0, "js": 0}, "starwars": {"css": 1, "js": 2}, "cnn": {"css": 3, "js": 0}}
PAGE_NAMES = tuple(TABLE_VI)
_EXT = {"gif": "gif", "jpeg": "jpg", "css": "css", "js": "js"}
_WORDS = ("the network mobile cell link user page news world video sport weather music movie star "
          "galaxy empire rebel story search mail finance travel photo home about contact more "
          "today latest update market report game fleet jedi ship planet").split()

# A 1×1 GIF89a with a two-colour table; padding goes in comment extensions before the image.
_GIF_HEAD = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00"
_GIF_TAIL = b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"


def _jpeg_parts() -> tuple[bytes, bytes]:
    """A baseline 8×8 grey JPEG, split where COM padding segments go (after SOI)."""
    dqt = b"\xff\xdb\x00\x43\x00" + b"\x01" * 64
    sof = b"\xff\xc0\x00\x0b\x08\x00\x08\x00\x08\x01\x01\x11\x00"
    # One Huffman code of length 1 per table: DC category 0, AC end-of-block.
    dht_dc = b"\xff\xc4\x00\x14\x00" + b"\x01" + b"\x00" * 15 + b"\x00"
    dht_ac = b"\xff\xc4\x00\x14\x10" + b"\x01" + b"\x00" * 15 + b"\x00"
    sos = b"\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00"
    return b"\xff\xd8", dqt + sof + dht_dc + dht_ac + sos + b"\x3f" + b"\xff\xd9"


def _gif(size: int, rng: random.Random) -> bytes:
    """A valid GIF of `size` bytes (±1: a comment's sub-block count steps by one byte)."""
    pad = size - len(_GIF_HEAD) - len(_GIF_TAIL) - 3  # extension introducer, label, terminator
    body = max(0, pad * 255 // 256)
    while body + 1 + (body + 1 + 254) // 255 <= pad:
        body += 1
    out = bytearray(_GIF_HEAD) + b"!\xfe"
    for i in range(0, body, 255):
        n = min(255, body - i)
        out += bytes([n]) + rng.randbytes(n)
    return bytes(out + b"\x00" + _GIF_TAIL)


def _jpeg(size: int, rng: random.Random) -> bytes:
    head, tail = _jpeg_parts()
    pad = size - len(head) - len(tail)
    out = bytearray(head)
    while pad >= 5:
        n = min(pad - 4, 65533)  # COM: marker, 2-byte length (counting itself), data
        out += b"\xff\xfe" + (n + 2).to_bytes(2, "big") + rng.randbytes(n)
        pad -= n + 4
    return bytes(out + tail)


def _text(size: int, rng: random.Random, line: str) -> str:
    """About `size` bytes of lines made by `line(words)`; cut or padded to exactly `size`."""
    parts, n = [], 0
    while n < size:
        s = line(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))) + "\n"
        parts.append(s)
        n += len(s)
    return "".join(parts)[:size]


@dataclass
class PageObject:
    kind: str
    name: str
    size: int


def _split(total: int, count: int, rng: random.Random) -> list[int]:
    if count == 0:
        return []
    weights = [rng.lognormvariate(0, 0.8) for _ in range(count)]
    sizes = [max(64, int(total * w / sum(weights))) for w in weights]
    sizes[0] += total - sum(sizes)
    return sizes


def plan_page(name: str, seed: int = 4) -> list[PageObject]:
    """The objects of page `name`: index.html first, then style sheets, scripts and images."""
    count, shares, total_kb = TABLE_VI[name]
    rng = random.Random(f"{name}-{seed}")
    total = round(total_kb * 1000)
    by_type = {k: round(total * v / 100) for k, v in shares.items()}
    n_text = _TEXT_OBJECTS[name]
    n_images = count - 1 - n_text["css"] - n_text["js"]
    image_bytes = by_type["gif"] + by_type["jpeg"]
    n_gif = round(n_images * by_type["gif"] / image_bytes)
    counts = {"css": n_text["css"], "js": n_text["js"], "gif": n_gif, "jpeg": n_images - n_gif}
    objects = [PageObject("html", "index.html", by_type["html"])]
    for kind in ("css", "js", "gif", "jpeg"):
        for i, size in enumerate(_split(by_type[kind], counts[kind], rng)):
            objects.append(PageObject(kind, f"{kind}/{i:02d}.{_EXT[kind]}", size))
    return objects


def _index_html(name: str, objects: list[PageObject], size: int, rng: random.Random) -> str:
    head = [f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{name}</title>",
            '<link rel="icon" href="data:,">']  # no favicon request: it is not part of the page
    head += [f'<link rel="stylesheet" href="{o.name}">' for o in objects if o.kind == "css"]
    head += [f'<script src="{o.name}"></script>' for o in objects if o.kind == "js"]
    body = ["</head><body>", f"<h1>{name}</h1>"]
    body += [f'<img src="{o.name}" width="80" height="60" alt="">' for o in objects if o.kind in ("gif", "jpeg")]
    start = "\n".join(head + body) + "\n"
    end = "</body></html>\n"
    filler = _text(max(0, size - len(start) - len(end)), rng, lambda w: f"<p>{w}</p>")
    return start + filler + end


def write_page(name: str, out_dir: Path, seed: int = 4) -> list[PageObject]:
    """Writes page `name` into `out_dir/name/`; returns its objects (sizes as written)."""
    objects = plan_page(name, seed)
    rng = random.Random(f"{name}-{seed}-content")
    root = out_dir / name
    for o in objects:
        path = root / o.name
        path.parent.mkdir(parents=True, exist_ok=True)
        if o.kind == "html":
            data = _index_html(name, objects, o.size, rng).encode()
        elif o.kind == "css":
            data = _text(o.size, rng, lambda w: f".{w.split()[0]}-{rng.randint(0, 999)} {{ margin: {rng.randint(0, 9)}px; /* {w} */ }}").encode()
        elif o.kind == "js":
            data = _text(o.size, rng, lambda w: f"var v{rng.randint(0, 9999)} = \"{w}\";").encode()
        elif o.kind == "gif":
            data = _gif(o.size, rng)
        else:
            data = _jpeg(o.size, rng)
        path.write_bytes(data)
        o.size = len(data)
    return objects


def write_pages(out_dir: Path, names: tuple[str, ...] = PAGE_NAMES, seed: int = 4) -> dict[str, list[PageObject]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return {n: write_page(n, out_dir, seed) for n in names}
