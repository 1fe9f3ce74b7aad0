"""The paste page and the API docs page: files shipped in the package, served with a strict CSP.

Nothing is fetched from elsewhere (no CDN, no font, no inline script): the pages work on an
air-gapped cluster, and `default-src 'self'` forbids any script but the app's own files.
"""

from __future__ import annotations

from importlib import resources

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
FILES = {  # URL path -> (file in static/, media type)
    "/": ("index.html", "text/html; charset=utf-8"),
    "/docs": ("docs.html", "text/html; charset=utf-8"),
    "/static/page.js": ("page.js", "text/javascript; charset=utf-8"),
    "/static/report_view.js": ("report_view.js", "text/javascript; charset=utf-8"),
    "/static/docs.js": ("docs.js", "text/javascript; charset=utf-8"),
    "/static/page.css": ("page.css", "text/css; charset=utf-8"),
}
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def load() -> dict[str, tuple[bytes, str]]:
    """URL path -> (bytes, media type), read once from the package."""
    static = resources.files(__package__) / "static"
    return {path: ((static / name).read_bytes(), media) for path, (name, media) in FILES.items()}
