"""From text to prose: the rules that turn docstrings, documentation pages, plays and books into
paragraphs, and paragraphs into sentences that read as prose.

Reading order: the embedded corpus's cleaning (`clean_paragraphs`, `prose_sentences`: a
docstring or help topic of the running Python), then the course corpus's readers, which must give
the same text on every Python 3.11-3.13: decoding (`decode_text`), reStructuredText and Markdown
markup (`strip_inline_markup`, `rst_paragraphs`), a module's docstrings parsed with `ast` under
the 3.11 grammar (`docstring_paragraphs`), plays and poems (`book_paragraphs`), and the sentence
filter of the course corpus (`course_sentences`). Pure functions of text; nothing is read from
disk here. Standard library only (and `sentences.py`).
"""

from __future__ import annotations

import ast
import inspect
import re
import unicodedata
import warnings

from ..sentences import split_sentences

__all__ = ["PYTHON_GRAMMAR", "book_paragraphs", "clean_paragraphs", "course_sentences", "decode_text",
           "docstring_paragraphs", "normalise_text", "prose_sentences", "rst_paragraphs",
           "strip_inline_markup"]

PYTHON_GRAMMAR = (3, 11)            # .py files are parsed as Python 3.11 (the oldest Python we support)

# ---------------------------------------------------------------------------------------------
# The embedded corpus: docstrings and help topics of the running Python

_MIN_WORDS, _MAX_WORDS = 3, 100        # shorter "sentences" are headings, longer ones are lists
_UNDERLINE = re.compile(r"^\s*([-=*~^+#\"'`])\1{2,}\s*$")
_TABLE = re.compile(r"^\s*(\+[-=+]+\+?|\|.*|=+( +=+)+)\s*$")  # grid-table rows, simple-table borders
_ITEM = re.compile(r"^([-*+] |\d+[.)] |[\w.\[\]()*]+\s+--\s)")  # a list item starts a new paragraph
_CODE_MARKERS = (">>>", "...", "$ ", "% ")


def clean_paragraphs(text: str) -> list[str]:
    """Prose paragraphs of a docstring or help topic: code, tables and grammar dropped, whitespace
    normalised.

    Drops indented blocks (code samples, grammar, argument tables), doctests and tables (up to
    the next blank line), grammar productions (`::=`), headings (a line over an underline)
    and the underlines themselves. List items become paragraphs of their own.
    """
    lines = inspect.cleandoc(text).splitlines()
    paragraphs, current, in_block = [], [], False
    for i, line in enumerate(lines):
        # a table or a doctest (prompt lines and their output) runs to the next blank line
        in_block = bool(line.strip()) and (in_block or _TABLE.match(line) is not None
                                           or line.startswith(">>>"))
        is_heading = i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) is not None
        if (current and _ITEM.match(line)) or in_block or not line.strip() or line[:1].isspace():
            if current:
                paragraphs.append(" ".join(current))
                current = []
        if (in_block or not line.strip() or line[:1].isspace() or _UNDERLINE.match(line) or is_heading
                or line.startswith(_CODE_MARKERS) or "::=" in line):
            continue
        current.append(line.strip())
    if current:
        paragraphs.append(" ".join(current))
    # "as follows::" introduces a (dropped) code block: keep the sentence, drop the marker
    return [" ".join(p.replace("::", ":").split()) for p in paragraphs]


def _is_prose(sentence: str) -> bool:
    """Most words are ordinary words (drops lists of CONSTANTS, signatures, fragments), no doctest
    prompt or grammar production anywhere."""
    if ">>>" in sentence or "::=" in sentence:
        return False
    words = sentence.split()
    plain = sum(w.strip(".,;:!?()\"'").isalpha() and not w.isupper() for w in words)
    return _MIN_WORDS <= len(words) <= _MAX_WORDS and plain >= len(words) / 2


def prose_sentences(text: str) -> list[str]:
    """Clean a docstring/topic and split it into sentences that read as prose."""
    return [s for p in clean_paragraphs(text) for s in split_sentences(p) if _is_prose(s)]


# ---------------------------------------------------------------------------------------------
# The course corpus: the same text from the same bytes on every Python

# directives whose content is code, maths, tables or navigation: dropped with their content
# (other directives, such as note, warning, versionadded, function or method, keep their text)
_DROPPED_DIRECTIVES = {
    "code", "code-block", "sourcecode", "literalinclude", "highlight", "math", "doctest", "testcode",
    "testoutput", "testsetup", "testcleanup", "ipython", "plot", "productionlist", "parsed-literal",
    "raw", "toctree", "autosummary", "automodule", "autoclass", "autofunction", "automethod",
    "autoattribute", "autodata", "autoexception", "image", "figure", "csv-table", "list-table", "table",
    "graphviz", "inheritance-diagram", "include", "contents", "index", "raw-html", "jupyter-execute",
    "program-output", "command-output", "literal", "toc", "sectionauthor", "moduleauthor",
    "codeauthor", "currentmodule", "module", "default-role", "role", "meta", "title", "line-block",
    "footnote", "citation", "replace", "tabularcolumns", "digraph", "mermaid", "exec", "runblock"}
_DIRECTIVE = re.compile(r"^\.\.\s+(?:[\w-]+:)*([\w-]+)::")          # ".. note::", ".. py:method:: f()"
_FIELD = re.compile(r"^:[^:\s][^:]*:(\s|$)")                          # ":param x:", ":noindex:"
_BULLET = re.compile(r"^([-*+•]|\d+[.)]|#\.|\(?[a-zA-Z0-9]\))\s+")    # a list item's marker
_HEADING_LINE = re.compile(r"^([-=*~^+#\"'`_])\1{2,}$")           # an underline or overline
_SKIPPED_SECTIONS = {"see also", "references", "examples", "example", "contents"}
# inline markup: roles, literals, links, emphasis, footnote and citation references
_ROLE = re.compile(r":[\w:+.-]+:`([^`]*)`")
_LITERAL = re.compile(r"``([^`]+)``")
_LINK = re.compile(r"`([^`<]*?)\s*(?:<[^`>]*>)?`__?")
_INTERPRETED = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*(\S(?:[^*]*\S)?)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*(\S(?:[^*]*\S)?)\*(?![\w*])")
_FOOTNOTE = re.compile(r"\s*\[(#[\w-]*|\*|\d+|[A-Za-z][\w.-]*\d{2}[\w.-]*)\]_")
_MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\((?:https?://|#)[^)\s]*\)")      # [text](https://...)
_BRACKETED_NAME = re.compile(r"\[([A-Za-z_~][\w.]*)\]")                       # [AlbertModel]
_UNDERSCORED = re.compile(r"(?<![\w_])_(\S(?:[^_]*\S)?)_(?![\w_])")   # _italic_ in Gutenberg texts
# a sentence with any of these is code or leftover markup, not prose
_CODE_SIGNS = re.compile(r"`|::|>>>|[{}|\\$]|\s=\s|==")
_SENTENCE_STARTS = "0123456789\"'(["
_SENTENCE_ENDS = (".", "!", "?", ":", '."', '!"', '?"', ".'", "!'", "?'", ".)", "!)", "?)")
# plays: a speaker's name on its own line ("Ham.", "First Clown."), act and scene headings
_SPEAKER = re.compile(r"^[A-Z][\w'-]*(\s[A-Z][\w'-]*){0,3}\.$")
_ACT_OR_SCENE = re.compile(r"^(ACT|Act|SCENE|Scene|EPILOGUE|Epilogue|PROLOGUE|Prologue)\b")
_STAGE_DIRECTION = re.compile(r"\[[^\]]*\]")


def normalise_text(text: str) -> str:
    """One kind of line ending ('\\n'), Unicode NFC, lone surrogates replaced (not encodable)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.encode("utf-8", "replace").decode("utf-8")
    return unicodedata.normalize("NFC", text)


def decode_text(data: bytes) -> str:
    """Text of a file: UTF-8 (Latin-1 when it is not), normalised (normalise_text)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return normalise_text(text)


def _dedent(text: str) -> str:
    """inspect.cleandoc's rule, written out so it cannot change with the Python version: tabs to
    spaces, the first line stripped, the common indent of the other lines removed."""
    lines = text.expandtabs().split("\n")
    indents = [len(line) - len(line.lstrip(" ")) for line in lines[1:] if line.strip(" ")]
    margin = min(indents, default=0)
    lines = [lines[0].strip(" ")] + [line[margin:] for line in lines[1:]]
    return "\n".join(lines).strip("\n")


def strip_inline_markup(text: str) -> str:
    """Plain words from reStructuredText inline markup: roles (:class:`~a.B` -> B, :ref:`text
    <target>` -> text), ``literals``, `links <url>`_, *emphasis*, **strong**, footnote references,
    and the Markdown that some docstrings use: [text](https://url), [Name]."""
    def role(m: re.Match) -> str:
        inner = m.group(1)
        if inner.endswith(">") and "<" in inner:
            inner = inner[:inner.rindex("<")].strip()
        if inner.startswith("~"):
            inner = inner[1:].rsplit(".", 1)[-1]
        return inner.lstrip("!")

    text = _ROLE.sub(role, text)
    text = _LITERAL.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _STRONG.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    text = _FOOTNOTE.sub("", text)
    text = _MARKDOWN_LINK.sub(r"\1", text)
    text = _BRACKETED_NAME.sub(r"\1", text)
    return " ".join(text.split())


def rst_paragraphs(text: str) -> list[str]:
    """Prose paragraphs of a reStructuredText page or docstring, inline markup stripped.

    Dropped: literal blocks (after '::') and code-like directives with their content, comments
    and link targets, doctests and tables (to the next blank line), headings, field lists, and
    the sections 'See Also', 'References' and 'Examples'. Other directives (note, versionadded,
    function, ...) lose their first line and keep their text. A paragraph is a run of lines at
    one indent; a list item starts a new one and takes its continuation lines.
    """
    lines = _dedent(text).split("\n")
    paragraphs: list[str] = []
    current: list[str] = []
    current_indent = 0
    skip_deeper: int | None = None      # drop blank lines and lines indented deeper than this
    in_block = skip_section = False     # a doctest or table runs to the next blank line

    def flush() -> None:
        nonlocal current
        if current and not skip_section:
            paragraph = strip_inline_markup(" ".join(current).replace("::", ":"))
            if paragraph:
                paragraphs.append(paragraph)
        current = []

    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if skip_deeper is not None:
            if not stripped or indent > skip_deeper:
                continue
            skip_deeper = None
        if not stripped:
            flush()
            in_block = False
            continue
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if _HEADING_LINE.match(following) and len(following) >= len(stripped) - 1 and not current:
            flush()
            skip_section = stripped.lower().rstrip(":") in _SKIPPED_SECTIONS
            continue
        if (in_block or _HEADING_LINE.match(stripped) or stripped.startswith((">>>", "+-", "+=", "|"))
                or _TABLE.match(stripped) or "::=" in stripped):
            flush()
            in_block = not _HEADING_LINE.match(stripped)
            continue
        if stripped.startswith(".."):               # directive, comment, target or substitution
            flush()
            directive = _DIRECTIVE.match(stripped)
            if directive is None or directive.group(1).lower() in _DROPPED_DIRECTIVES:
                skip_deeper = indent
            continue
        if _FIELD.match(stripped):                  # a directive's option or a docstring field
            flush()
            stripped = _FIELD.sub("", stripped).strip()
            if not stripped:
                continue
        bullet = _BULLET.match(stripped)
        if current and (bullet or indent < current_indent or
                        (indent > current_indent and not current[0].startswith("\0"))):
            flush()
        if bullet:
            stripped = stripped[bullet.end():]
            current_indent = indent + bullet.end()
            current.append("\0" + stripped)         # marks a list item: continuation lines join it
        else:
            if not current:
                current_indent = indent
            current.append(stripped)
        if stripped.endswith("::"):                 # a literal block follows
            flush()
            skip_deeper = indent
    flush()
    return [p.replace("\0", "") for p in paragraphs]


def _docstring(node: ast.AST) -> str | None:
    """A node's docstring as written (ast.get_docstring without its version-dependent cleaning)."""
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        value = body[0].value.value
        return value if isinstance(value, str) else None
    return None


def docstring_paragraphs(source: bytes) -> list[str] | None:
    """Prose paragraphs of a module's docstrings in reading order: the module's, then each
    top-level class (with its methods) and function. None when the file is not Python 3.11."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # invalid escape sequences in old code
            tree = ast.parse(source, feature_version=PYTHON_GRAMMAR)
    except (SyntaxError, ValueError):
        return None
    nodes: list[ast.AST] = [tree]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nodes.append(node)
        elif isinstance(node, ast.ClassDef):
            nodes += [node] + [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    texts = [normalise_text(d) for n in nodes if (d := _docstring(n))]
    return [p for text in texts for p in rst_paragraphs(text)]


def book_paragraphs(text: str) -> list[str]:
    """Paragraphs of a plain-text play or poem: blocks between blank lines, with speakers' names,
    act and scene headings, lines in capitals and [stage directions] dropped, _italics_ unmarked."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.strip().split("\n")]
        if not lines[0] or _ACT_OR_SCENE.match(lines[0]):
            continue
        if len(lines) > 1 and _SPEAKER.match(lines[0]) and len(lines[0]) < 30:
            lines = lines[1:]
        lines = [line for line in lines if not (line.isupper() and len(line.split()) < 8)]
        paragraph = _STAGE_DIRECTION.sub(" ", " ".join(lines))
        paragraph = " ".join(_UNDERSCORED.sub(r"\1", paragraph).split())
        if paragraph:
            paragraphs.append(paragraph)
    return paragraphs


def course_sentences(paragraph: str) -> list[str]:
    """Sentences of a paragraph that read as prose: ordinary words (as for pydocs), at most
    _MAX_WORDS words, starting and ending like a sentence, with no sign of code or markup left."""
    return [s for s in split_sentences(paragraph)
            if _is_prose(s) and (s[0].isupper() or s[0] in _SENTENCE_STARTS) and s.endswith(_SENTENCE_ENDS)
            and not _CODE_SIGNS.search(s)]
