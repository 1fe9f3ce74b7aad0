"""What a chat tool, an issue tracker or a browser does to a pasted line, undone (ingest/chat.py),
and the lines that only look like it, left alone."""

from __future__ import annotations

import pytest

from triage.ingest.chat import plain, unescape_html
from triage.ingest.lines import logged_as_chatter, peel, readable
from triage.ingest.reshape import unfold

ERROR = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


@pytest.mark.parametrize(
    "pasted",
    [
        f"`{ERROR}`",
        f"- {ERROR}",
        f"* {ERROR}",
        f"> {ERROR}",
        f"&gt; {ERROR}",
        f"[10:42 AM] alice: {ERROR}",
        f"[10:42] Alice Smith: {ERROR}",
        f"[10:42:05] {ERROR}",
        f"<bob> {ERROR}",
        f"<@bob> {ERROR}",
        f"Dec 05 10:42:05 {ERROR}",
        f"  12 | {ERROR}",
        f"12 \u2502 {ERROR}",
        f"\u200b{ERROR}",
        f"12: {ERROR}",
    ],
)
def test_a_chat_mark_before_a_line_is_peeled(pasted):
    assert peel(pasted, 1).text == ERROR


@pytest.mark.parametrize(
    "line",
    [
        "- Avoid using a larger max_model_len than the model supports.",  # a message's own list
        "* the engine will retry",
        "<frozen importlib._bootstrap>",
        "[10:42 AM] ValueError: bad value",  # a time, then no name: the exception stays
        "`x` is not a valid choice",
        "12 GiB free",
        "pages 3\u20135 of the manual \u2014 see above",  # prose dashes are no flags
    ],
)
def test_what_only_looks_like_a_chat_mark_stays(line):
    peeled = peel(line, 1).text
    if line.startswith("[10:42 AM] "):
        assert peeled == "ValueError: bad value"
    else:
        assert peeled == line


def test_a_chat_clients_typography_is_undone():
    assert plain("can\u2019t use \u201cauto\u201d\u2026") == 'can\'t use "auto"...'
    assert (
        plain("\u2014tensor-parallel-size 2 \u2013max-model-len 4096")
        == "--tensor-parallel-size 2 --max-model-len 4096"
    )
    assert plain("a\u00a0b\u200bc\u2060d\ufeffe") == "a bcde"
    assert plain("\u2014---BEGIN RSA PRIVATE KEY\u2014---") == "-----BEGIN RSA PRIVATE KEY-----"
    assert plain("plain ascii") == "plain ascii"


def test_html_entities_are_undone_once():
    assert unescape_html("File &quot;x.py&quot;, can&#39;t &lt;a&gt; &#x27;b&#x27;") == "File \"x.py\", can't <a> 'b'"
    assert unescape_html("&amp;gt;") == "&gt;"
    assert unescape_html("AT&T; &bogus; &#0;") == "AT&T; &bogus; &#0;"


def test_the_report_quotes_the_line_normalised_with_its_prefix():
    assert readable("[10:42 AM] alice: can&#39;t \u201cx\u201d") == '[10:42 AM] alice: can\'t "x"'


def test_a_warning_behind_a_chat_stamp_is_still_a_warning():
    assert logged_as_chatter("Dec 05 10:42:05 WARNING 11-20 09:14:06 [hub.py:707] gated repo")
    assert logged_as_chatter("<bob> (APIServer pid=1) INFO 11-20 09:14:06 [x.py:1] hi")
    assert not logged_as_chatter("<bob> ValueError: bad")


def test_a_whole_log_as_one_json_string_is_unfolded_by_its_records():
    body = "INFO 07-18 09:30:06 [api.py:1] up\\nERROR 07-18 09:30:07 [x.py:2] said \\\"no\\\"\\nprompt: 'a\\\\nb'\\n"
    assert unfold(body) == [
        "INFO 07-18 09:30:06 [api.py:1] up",
        'ERROR 07-18 09:30:07 [x.py:2] said "no"',
        "prompt: 'a\\nb'",
    ]


def test_a_line_with_a_literal_backslash_n_is_no_json_log():
    assert unfold("ValueError: expected '\\n' here") == ["ValueError: expected '\\n' here"]


@pytest.mark.parametrize(
    ("pasted", "line"),
    [
        (
            '12:   File "/srv/venv/lib/python3.10/site-packages/vllm/worker/worker.py", line 79, in init_model',
            '  File "/srv/venv/lib/python3.10/site-packages/vllm/worker/worker.py", line 79, in init_model',
        ),
        ("13:     self.model = get_model(self.model_config)", "    self.model = get_model(self.model_config)"),
        ("12:  x = 1", "12:  x = 1"),  # one space of indent after `N: ` is no code line
        ("12:30   lunch break", "12:30   lunch break"),  # a time, not a gutter
    ],
)
def test_a_gutter_before_an_indented_line_is_peeled_and_only_there(pasted, line):
    assert peel(pasted, 1).text == line


def _anchored(text: str) -> tuple[bool, bool]:
    from triage.parse.vocabulary import matcher

    return matcher().classify(text)


def test_a_short_paste_as_one_json_string_is_split_where_a_piece_is_anchored():
    body = "    return forward_call(*args, **kwargs)\\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.\\n"
    assert unfold(body, _anchored) == [
        "    return forward_call(*args, **kwargs)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.",
    ]
    assert unfold(body) == [body]  # without the scanner's test, only record shapes split a line


def test_a_message_whose_own_newline_leads_to_plain_text_stays_one_line():
    line = 'WARNING 03-14 08:02:12 [x.py:1] prompt was "hello\\nworld"'
    assert unfold(line, _anchored) == [line]
    assert unfold('not json \\" \\q\\nTraceback', _anchored) == ['not json \\" \\q\\nTraceback']


def test_an_exception_after_a_ts_stamp_is_no_journald_host_and_unit():
    error = "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"
    assert peel(f"Mar 14 09:12:03 {error}", 1).text == error
    journald = peel("Nov 29 10:11:40 gpu-node-3 vllm[4121]: INFO 11-29 10:11:40 [x.py:1] up", 1)
    assert journald.text == "up"  # a real journald line: host and unit still peeled


def test_a_frame_in_a_chat_clients_curly_quotes_is_an_anchor_for_the_scanner():
    assert _anchored(
        "  File \u201c/srv/venv/lib/python3.10/site-packages/vllm/worker/worker.py\u201d, line 79, in init_model"
    )[0]
    assert peel("  File \u201c/srv/x.py\u201d, line 79, in f", 1).text == '  File "/srv/x.py", line 79, in f'


def test_curly_quotes_undone_are_no_prefix_a_wrapped_paste_could_start_a_record_with():
    from triage.ingest.lines import starts_record

    assert not starts_record("py\u201d, line 62, in get_model")  # the rest of a frame a terminal cut
    assert starts_record("  File \u201c/srv/x.py\u201d, line 62, in get_model")
