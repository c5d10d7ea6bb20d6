"""mailfilter.headers: our one header added, and every incoming copy removed — by tagging
and by the pass-through paths (one implementation for both)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from mailfilter.headers import pass_through, remove_ours, tag_message

header_names = st.sampled_from(["Subject", "From", "X-Dupfilter", "x-dupfilter",
                                "X-DUPFILTER ", "X-Dupfilter-Other", "Received"])
header_values = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
                        max_size=30)          # no lone surrogates: header bytes are UTF-8
continuations = st.lists(st.sampled_from([b" folded", b"\tfolded too"]), max_size=2)


def ours(line: bytes) -> bool:
    name = line.split(b":", 1)[0] if b":" in line else b""
    return name.strip().lower() == b"x-dupfilter"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(header_names, header_values, continuations), max_size=8),
       st.binary(max_size=200), st.sampled_from([b"\n", b"\r\n"]), st.booleans())
@example(fields=[("X-Dupfilter", "duplicate", [])], body=b"", newline=b"\n", mbox=False)
@example(fields=[("X-Dupfilter", "duplicate", [b" x"])], body=b"x", newline=b"\r\n",
         mbox=True)
def test_remove_ours_takes_out_exactly_our_fields(fields: list, body: bytes, newline: bytes,
                                                 mbox: bool) -> None:
    envelope = [b"From ann@example.org Mon Nov 30 10:00:00 2026"] if mbox else []
    lines, expected = list(envelope), list(envelope)
    for name, value, folded in fields:
        field = [f"{name}: {value}".encode()] + folded
        lines += field
        if not ours(field[0]):
            expected += field
    raw = (newline.join(lines) + newline if lines else b"") + newline + body
    want = (newline.join(expected) + newline if expected else b"") + newline + body
    assert remove_ours(raw) == want
    assert pass_through(raw) == (want, None)
    # Tagging removes the same fields: the tagged message less our header is the same.
    assert remove_ours(tag_message(raw, "unique")) == want
    if want == raw:
        assert remove_ours(raw) is raw           # nothing to remove: the very same bytes


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_remove_ours_never_raises_and_keeps_foreign_bytes(raw: bytes) -> None:
    out = remove_ours(raw)
    assert len(out) <= len(raw)
    if b"upfilter" not in raw.lower():
        assert out is raw


def test_only_the_header_is_touched() -> None:
    raw = (b"Subject: hi\nX-Dupfilter: duplicate; forged\n\tcontinued\nTo: bob\n\n"
           b"X-Dupfilter: duplicate (a line of the body)\n")
    assert remove_ours(raw) == (b"Subject: hi\nTo: bob\n\n"
                                b"X-Dupfilter: duplicate (a line of the body)\n")
    # No header at all (the message starts with its blank line): nothing is a field.
    headless = b"\nX-Dupfilter: duplicate\n\nbody\n"
    assert remove_ours(headless) is headless
    assert tag_message(headless, "unique") == b"X-Dupfilter: unique\n" + headless


def test_no_separator_and_only_our_header() -> None:
    assert remove_ours(b"X-Dupfilter: duplicate") == b""
    assert remove_ours(b"X-Dupfilter: duplicate\r\n") == b""
    assert remove_ours(b"X-Dupfilter: duplicate\n\nbody") == b"\nbody"
    assert remove_ours(b"Subject: x\nX-Dupfilter: duplicate") == b"Subject: x"


def test_pass_through_gives_the_original_when_removing_fails(monkeypatch) -> None:
    import mailfilter.headers

    def broken(raw: bytes) -> bytes:
        raise KeyboardInterrupt

    monkeypatch.setattr(mailfilter.headers, "remove_ours", broken)
    raw = b"X-Dupfilter: duplicate\n\nbody\n"
    out, error = pass_through(raw)
    assert out is raw and isinstance(error, KeyboardInterrupt)


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.lists(st.sampled_from([b" stray", b"\tstray", b" "]), max_size=3),
       st.lists(st.tuples(header_names, header_values, continuations), max_size=5),
       st.sampled_from([b"\n", b"\r\n"]), st.booleans())
def test_our_header_goes_below_the_mbox_line_and_stray_folded_lines(
        mbox: bool, stray: list[bytes], fields: list, newline: bytes, separator: bool) -> None:
    """An mbox ``From `` line and folded lines that continue no field stay on top (our
    header below them, or they would fold into it); every other field but ours follows,
    byte for byte."""
    envelope = ([b"From ann@example.org Mon Nov 30 10:00:00 2026"] if mbox else []) + stray
    lines, expected = list(envelope), []
    for name, value, folded in fields:
        field = [f"{name}: {value}".encode()] + folded
        lines += field
        if not ours(field[0]):
            expected += field
    end = newline + b"body\n" if separator else b""
    raw = newline.join(lines) + newline + end if lines else end
    tagged = tag_message(raw, "unique")
    if not lines and not separator:
        assert tagged == b"X-Dupfilter: unique\n"      # (an empty message has no line end)
        return
    assert tagged == newline.join(envelope + [b"X-Dupfilter: unique"] + expected) + \
        newline + end
