"""The docs read whole: every paragraph ends its sentence, and every file they name in the repository is there."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md"] + [os.path.join("docs", name) for name in sorted(os.listdir(os.path.join(ROOT, "docs")))
                        if name.endswith(".md")]


def _paragraphs(text: str):
    """(last line number, last line) of each prose paragraph that is not followed by a code block (which it
    may introduce): not code, headings or tables."""
    lines, fenced, block = text.splitlines(), False, []
    ended = []
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            if fenced and ended and ended[-1][2] == number:
                ended.pop()  # it introduces this code block
            block = []
            continue
        if fenced:
            continue
        if not line.strip() or line.startswith("#"):
            if block:
                following = next((n for n in range(number + 1, len(lines) + 1) if lines[n - 1].strip()), 0)
                ended.append((number - 1, block, following))
            block = []
            continue
        block.append(line)
    if block:
        ended.append((len(lines), block, 0))
    return [(number, block) for number, block, _ in ended]


@pytest.mark.parametrize("doc", DOCS)
def test_every_paragraph_ends_its_sentence(doc):
    with open(os.path.join(ROOT, doc)) as f:
        text = f.read()
    unfinished = [f"{doc}:{number}: {block[-1].strip()!r}" for number, block in _paragraphs(text)
                  if not block[0].lstrip().startswith(("|", "<", "!["))
                  and not re.search(r"[.:!?)`*>\]]$", block[-1].rstrip())]
    assert unfinished == []


@pytest.mark.parametrize("doc", DOCS)
def test_every_markdown_file_named_is_in_the_repository(doc):
    with open(os.path.join(ROOT, doc)) as f:
        text = f.read()
    named = set(re.findall(r"`([\w./-]+\.md)`", text)) | set(re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]*)?\)", text))
    here = os.path.dirname(os.path.join(ROOT, doc))
    places = [here, ROOT, os.path.join(ROOT, "bench", "results")]  # results are often named by file alone
    missing = sorted(name for name in named if not any(os.path.exists(os.path.join(p, name)) for p in places)
                     and name != "STYLE.md")  # the project's style guide, beside the repository
    assert missing == []
