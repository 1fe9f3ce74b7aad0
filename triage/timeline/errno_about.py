"""An OS error read two ways: which errno it is, and what it is about.

The errno alone does not name a cause (../shared/errors.md §4.1, §9 traps 6-7): `[Errno 28]`
on /dev/shm is shared memory and on a cache folder a full disk; `[Errno 99]` binding the API
server's --host is an argument, inside torch.distributed a multi-node address. So the fallback
rules read two fields: `errno_name` (from the generated table, errno_table.py: the C library's
text decides before the number, since macOS and Windows number the same condition otherwise)
and `about`, the thing the error concerns, read off the path it names and the modules of the
traceback it was raised in:

- `shm`: a path in /dev/shm, or a shared-memory segment name (torch's `/torch_<pid>_...`,
  NCCL's `nccl-*`, psm's `psm_*`);
- `cache`: a path a library writes caches, locks or temporary files to;
- `file`: another path (a model folder, a file a flag names);
- `hub`: raised in a hub client or the HTTP stack under it;
- `distributed`: raised in torch.distributed / vLLM's distributed set-up / ZMQ / Ray, or a
  message naming the rendezvous (c10d, TCPStore, MASTER_ADDR);
- `api_server`: raised while the API server binds its socket;
- none: the log does not say (a one-line paste).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from triage.parse.layer_hints import is_shm_path
from triage.timeline.errno_table import NAMES, TEXTS

_BY_TEXT = {text.lower(): NAMES[n] for n, text in TEXTS.items()}
# the text after Python's `[Errno N] `, Rust's `<text> (os error N)` or torch's `<text> (N)`
_TEXT_AFTER = re.compile(r"\[Errno -?\d+\] ([^:'\n]+)")
_TEXT_BEFORE = re.compile(r"(?:^|: )([A-Z][a-z][^:()\n]*?) \((?:os error |errno: )?\d{1,4}\)")
_TEXT_FIRST = re.compile(r"^([A-Z][a-z][^:()\n]*?)(?: \(|:|$)")  # pyzmq: `<text> (addr='tcp://...')`
_CACHE_WORDS = ("cache", ".lock", "/tmp", "huggingface", ".triton", "torch_extensions", "/.config", "xdg")
# Module prefixes (dotted, as root_exception._module gives them) and what raising there is about.
_MODULES = (
    ("huggingface_hub", "hub"),
    ("transformers.utils.hub", "hub"),
    ("modelscope", "hub"),
    ("requests", "hub"),
    ("urllib3", "hub"),
    ("httpx", "hub"),
    ("httpcore", "hub"),
    ("hf_xet", "hub"),
    ("torch.distributed", "distributed"),
    ("vllm.distributed", "distributed"),
    ("zmq", "distributed"),
    ("ray", "distributed"),
    ("vllm.entrypoints", "api_server"),
    ("uvicorn", "api_server"),
)
_DISTRIBUTED_WORDS = re.compile(r"c10d|TCPStore|rendezvous|MASTER_ADDR|MASTER_PORT|init_process_group|tcp://")
_HUB_WORDS = re.compile(r"https?://(?:huggingface\.co|hf\.co|hf-mirror\.com|[\w.\-]*modelscope\.cn)|HF_ENDPOINT")


def errno_name(message: str, number: int | None) -> str | None:
    """`ENOSPC`, `EADDRNOTAVAIL`...: by the C library's text where the message prints it, else by number."""
    for pattern in (_TEXT_AFTER, _TEXT_BEFORE, _TEXT_FIRST):
        m = pattern.search(message)
        if m:
            name = _BY_TEXT.get(m.group(1).strip().lower())
            if name:
                return name
    return NAMES.get(number) if number is not None else None


def about(path: str | None, modules: Iterable[str | None], message: str) -> str | None:
    """What the error concerns (see the module's docstring), or None where the log does not say."""
    if path:
        if is_shm_path(path):
            return "shm"
        if any(w in path.lower() for w in _CACHE_WORDS):
            return "cache"
    for module in modules:  # innermost first: the code that made the call decides
        for prefix, what in _MODULES:
            if module and (module == prefix or module.startswith(prefix + ".")):
                return what
    if _DISTRIBUTED_WORDS.search(message):
        return "distributed"
    if _HUB_WORDS.search(message):
        return "hub"
    return "file" if path and "/" in path else None
