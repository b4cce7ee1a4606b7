"""Reading a user's CSV file: the one reader of training data, uploads and files to classify.

A CSV of one column of texts (``text`` / ``my laptop will not turn on`` / ``who wrote hamlet,
the play``) must come back as one column, every row whole: so the delimiter is read off the
header line alone, never guessed from the rows (where a text's commas would vote), and a header
with none of ``, ; TAB |`` is one column. A row with more fields than the header is an error
naming its line (a text holding the delimiter, unquoted), never a row skipped: what is read is
every row of the file, in order. Quoted fields may hold the delimiter, quotes (doubled) and line
breaks. Encodings: UTF-8 with or without BOM, UTF-16 with a BOM, else latin-1 (said).
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..core.errors import GleeError

MAX_CSV_BYTES = 200 * 1024 * 1024
MAX_COLUMNS = 1000  # a text classification file has a few; a header of thousands is a text
# Rows shorter than the header are padded, so a wide header over one-field rows would make a
# frame quadratic in the file's size: the cells read may be at most the file's bytes (a full
# row costs a delimiter byte a cell) beyond this slack.
CELL_SLACK = 1_000_000
DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may run as a formula
ONE_COLUMN = "\x1f"  # the ASCII unit separator: no text holds it, so nothing splits a row


def decode(raw: bytes, source: str, warnings: list[str]) -> str:
    """The file's text: UTF-16 (by its BOM), UTF-8 (BOM or not), else latin-1 (with a
    warning); binary content is an error."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:  # an odd length, a lone surrogate
            raise GleeError(
                f"{source}: starts as UTF-16 but is not valid UTF-16 (byte "
                f"{exc.start}: {exc.reason}); save it again as CSV (UTF-8)"
            ) from None
    if b"\x00" in raw[:4096]:
        raise GleeError(
            f"{source}: this is not a text file (binary content); save it as CSV (UTF-8)"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        warnings.append(f"{source}: not UTF-8, read as latin-1 - check accented characters")
        return raw.decode("latin-1")


def header_delimiter(text: str) -> str | None:
    """The delimiter the header line uses (the most frequent of ``, ; TAB |`` outside quotes;
    ties: the order of :data:`DELIMITERS`), or None: the header is one column."""
    header, counts, inside = text.split("\n", 1)[0], dict.fromkeys(DELIMITERS, 0), False
    for char in header:
        if char == '"':
            inside = not inside
        elif not inside and char in counts:
            counts[char] += 1
    best = max(counts, key=counts.get)
    return best if counts[best] else None


def read_csv_frame(path: str | os.PathLike) -> tuple[pd.DataFrame, list[str]]:
    """Parse a CSV file into strings, every row of it in order: its delimiter read off the
    header line, its encoding detected (:func:`decode`); a row with more fields than the header
    is an error naming its line, a row with fewer gets empty fields, blank lines are no rows."""
    path = Path(path).expanduser()
    source = str(path)
    if not path.is_file():
        raise GleeError(f"CSV file not found: {path}")
    if path.stat().st_size > MAX_CSV_BYTES:
        raise GleeError(f"{source}: larger than the {MAX_CSV_BYTES // 2**20} MiB limit")
    warnings: list[str] = []
    raw = path.read_bytes()
    text = decode(raw, source, warnings)
    max_cells = CELL_SLACK + len(raw)
    if not text.strip():
        raise GleeError(f"{source}: the file is empty; expected a header row and labelled rows")
    line = _unclosed_quote_line(text)
    if line is not None:
        raise GleeError(
            f'{source}: the " opened on line {line} is never closed, so the rest '
            'of the file reads as one field; close it (a " inside a field is '
            'written "")'
        )
    delimiter = header_delimiter(text)
    csv.field_size_limit(max(csv.field_size_limit(), MAX_CSV_BYTES))  # one long text is a row
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter or ONE_COLUMN)
    rows: list[list[str]] = []
    header: list[str] | None = None
    try:
        for fields in reader:
            if not fields or (len(fields) == 1 and not fields[0].strip() and header):
                continue  # a blank line
            if header is None:
                header = [f.strip() for f in fields]
                if len(header) > MAX_COLUMNS:
                    raise GleeError(
                        f"{source}: the header line has {len(header):,} columns "
                        f"({DELIMITERS[delimiter]}-separated), more than the {MAX_COLUMNS:,} "
                        "this reader takes; the first line must name the columns (e.g. "
                        "text,label): keep the text and label columns, drop the others"
                    )
                continue
            if len(fields) > len(header):
                raise GleeError(
                    f"{source}: line {reader.line_num} has {len(fields)} fields, the header "
                    f"{len(header)} ({DELIMITERS[delimiter]}-separated); put a text that holds "
                    f"a {DELIMITERS[delimiter]} in double quotes, or fix that line"
                )
            if (len(rows) + 1) * len(header) > max_cells:
                raise GleeError(
                    f"{source}: the header names {len(header):,} columns but the rows hold "
                    f"far fewer fields (line {reader.line_num} has {len(fields)}); read as a "
                    f"table it would be {len(header):,} columns wide for every row, too large "
                    "for a file of this size: make the first line the column names the rows "
                    "have (e.g. text,label)"
                )
            rows.append(fields + [""] * (len(header) - len(fields)))
    except csv.Error as exc:
        raise GleeError(
            f"{source}: not a readable CSV (line {reader.line_num}: {exc}); check the quoting"
        ) from None
    if not rows:
        raise GleeError(f"{source}: header only, no rows (columns: {header})")
    return pd.DataFrame(rows, columns=_unique(header), dtype=str), warnings


def _unique(names: list[str]) -> list[str]:
    """Column names made unique as pandas does (``a``, ``a.1``), blank ones named by place."""
    out, seen = [], {}
    for index, name in enumerate(names):
        name = name or f"Unnamed: {index}"
        if name in seen:
            seen[name] += 1
            name = f"{name}.{seen[name]}"
        seen.setdefault(name, 0)
        out.append(name)
    return out


def _unclosed_quote_line(text: str) -> int | None:
    """The line whose quoted field is still open at the end of ``text``, or None. A ``"``
    opens a field only at its start (``a 5" screen`` holds an inch mark); ``""`` inside a
    quoted field is a quote. Jumps from quote to quote (``str.find``): linear at C speed."""
    index, line = text.find('"'), 1
    counted = 0  # the newlines before ``counted`` are in ``line``
    while index != -1:
        if index == 0 or text[index - 1] in ",;\t|\n\r":  # a field opens
            line += text.count("\n", counted, index)
            counted, opened = index, line
            close = index
            while True:  # to the closing quote, past doubled ones
                close = text.find('"', close + 1)
                if close == -1:
                    return opened
                if text[close + 1 : close + 2] != '"':
                    break
                close += 1
            index = close + 1
        else:
            index += 1
        index = text.find('"', index)
    return None


TEXT_COLUMN_NAMES = (
    "text",
    "sentence",
    "content",
    "review",
    "document",
    "utterance",
    "query",
    "question",
    "text_a",
    "sentence1",
)
LABEL_COLUMN_NAMES = ("label", "labels", "class", "category", "intent", "target", "y")


@dataclass(frozen=True)
class Columns:
    """Which columns of a user's file hold the text, the label and an optional second text
    (None: found by their names, else by their contents: :func:`pick_column`)."""

    text: str | None = None
    label: str | None = None
    text_b: str | None = None

    def __post_init__(self):  # an empty name (a form's blank box): none given
        for name in ("text", "label", "text_b"):
            object.__setattr__(self, name, getattr(self, name) or None)

    def options(self) -> dict[str, str | None]:
        """As the command line's options and an upload's record name them."""
        return {"text_column": self.text, "label_column": self.label, "text_b_column": self.text_b}

    @classmethod
    def from_options(cls, values: dict) -> Columns:
        """Read back :meth:`options`."""
        return cls(*(values.get(key) for key in ("text_column", "label_column", "text_b_column")))


def find_column(columns: list[str], candidates: tuple[str, ...]) -> str | None:
    """The first column whose name (any case) is one of ``candidates``."""
    lowered = {c.lower().strip(): c for c in columns}
    return next((lowered[name] for name in candidates if name in lowered), None)


def guess_columns(frame: pd.DataFrame) -> dict[str, str]:
    """The text and label columns of ``frame`` by their contents, for a CSV whose header names
    neither: the text, the column with the longest values; the label, of the rest, the one
    whose values repeat most (at least 2 distinct, at most half the rows). A ``split`` column is
    neither. What cannot be told is left out."""
    columns = [c for c in frame.columns if str(c).strip().lower() != "split"]
    values = {c: frame[c].astype(str).str.strip() for c in columns}
    guessed = {}
    if columns:
        guessed["text"] = max(columns, key=lambda c: values[c].str.len().mean())
    rows = len(frame)
    labels = [
        (values[c].nunique(), c)
        for c in columns
        if c != guessed.get("text") and 2 <= values[c].nunique() <= max(2, rows // 2)
    ]
    if labels:
        guessed["label"] = min(labels, key=lambda pair: pair[0])[1]
    return guessed


def pick_column(
    columns: list[str],
    given: str | None,
    candidates: tuple[str, ...],
    what: str,
    source: str,
    guessed: str | None = None,
    warnings: list[str] | None = None,
) -> str:
    """The column holding the ``what`` (``given`` by name, else the first of ``candidates``,
    else ``guessed`` from the contents, :func:`guess_columns`, said in ``warnings``): an error
    naming the columns when there is none."""
    if given:
        if given not in columns:
            raise GleeError(f"{source}: no {what} column named {given!r}; columns are {columns}")
        return given
    found = find_column(columns, candidates)
    if found:
        return found
    if guessed:
        if warnings is not None:
            warnings.append(
                f"{source}: no column is called {candidates[0]!r}: the {what} is taken from "
                f"{guessed!r} by its contents (name another with --{what}-column NAME)"
            )
        return guessed
    raise GleeError(
        f"{source}: cannot tell which column holds the {what}; columns are {columns}. "
        f"Name it (--{what}-column NAME) or call it one of {list(candidates[:4])}"
    )


def read_texts_csv(
    path: str | os.PathLike, text_column: str | None = None, text_b_column: str | None = None
) -> tuple[pd.DataFrame, str, str | None]:
    """A CSV of texts to classify: its rows as read (every column kept, in order), the text
    column and the optional second text column. Same reading and errors as training data."""
    source = str(Path(path).expanduser())
    frame, _ = read_csv_frame(path)
    columns = [str(c) for c in frame.columns]
    text_col = pick_column(columns, text_column, TEXT_COLUMN_NAMES, "text", source)
    if text_b_column and text_b_column not in columns:
        raise GleeError(
            f"{source}: no second text column named {text_b_column!r}; columns are {columns}"
        )
    return frame, text_col, text_b_column


def as_written(text: str) -> str:
    """A cell of a CSV this studio wrote for spreadsheets (``runs.tables.spreadsheet_csv``
    gave a formula-looking cell a leading ``'``) as it was before: a file written by
    ``suggest`` and read back by ``train --add`` keeps its texts."""
    return (
        text[1:]
        if text.startswith("'") and text[1:2] and text[1:].startswith(FORMULA_START)
        else text
    )
