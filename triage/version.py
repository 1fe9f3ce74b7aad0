"""The package version, in a module of its own: every part may import it without importing the
package root (which re-exports the API, `triage/__init__.py`)."""

__version__ = "0.1.0"
