"""Text made safe to print to a person's terminal.

Everything the command line prints that came from a file (chunk text, metadata, file names in
warnings and errors) goes through :func:`strip_terminal_controls`, so a document cannot clear
the screen, retitle the window, recolour the output or reorder what is shown.
"""

from __future__ import annotations

import re

__all__ = ["BIDI_CONTROLS", "escape_raw_controls", "plural", "strip_terminal_controls"]

#: ANSI escape sequences, whole: CSI (``ESC [``, parameters, a final byte), the strings OSC,
#: DCS, SOS, PM and APC (``ESC ]``, ``ESC P``, ``ESC X``, ``ESC ^``, ``ESC _``, up to BEL or
#: ST) and the other ``ESC`` sequences (intermediate bytes, a final byte). Their 8-bit forms
#: (C1 introducers) are made harmless by removing the C1 character alone.
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)
#: The bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they
#: make a terminal show text in another order than it is stored ("Trojan Source").
BIDI_CONTROLS = "\u202a-\u202e\u2066-\u2069"
#: Control characters left after the sequences: C0 but newline and tab, DEL, C1, bidi controls.
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{BIDI_CONTROLS}]")
#: The characters JSON output escapes beyond what :func:`json.dumps` does: DEL, C1, bidi controls.
_JSON_RAW_CONTROL = re.compile(f"[\\x7f-\\x9f{BIDI_CONTROLS}]")


def strip_terminal_controls(text: str) -> str:
    r"""Removes what a terminal would act on instead of showing, for printing text to a person.

    Args:
        text: Any text (a chunk, a metadata value, the question, a file name).

    Returns:
        ``text`` without ANSI escape sequences (CSI such as ``"\x1b[31m"``, OSC such as
        ``"\x1b]0;title\x07"`` and the like) and without control characters: C0 except
        newline and tab, DEL, C1 (U+0080 to U+009F) and the bidirectional controls of
        :data:`BIDI_CONTROLS`. Everything else is kept.
    """
    return _CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", text))


def escape_raw_controls(json_text: str) -> str:
    r"""JSON text with DEL, C1 and bidi controls written as ``\u`` escapes (same meaning).

    :func:`json.dumps` with ``ensure_ascii=False`` leaves them raw; they can only be inside
    JSON strings, where the escape stands for the same character.
    """
    return _JSON_RAW_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


def plural(count: int, word: str, words: str | None = None) -> str:
    """``"1 document"``, ``"2 documents"``: a count with its noun in the right number.

    Args:
        count: How many.
        word: The noun for one.
        words: The noun for several (default ``word + "s"``).
    """
    return f"{count:,} {word if count == 1 else (words or word + 's')}"
