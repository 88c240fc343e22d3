#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/*.md.

For every Markdown link or image, `[text](target)`, `![alt](target)` or a reference definition
`[label]: target`, outside code blocks and inline code:

- http://, https://, mailto: and other scheme links are ignored;
- the file a relative target names (relative to the Markdown file) must exist;
- a `#anchor` (alone, for the same file, or after a .md file) must match a heading of that file
  by GitHub's slug rules: the heading's text without Markdown formatting, lowercased, every
  character that is not a letter, digit, space, hyphen or underscore dropped, each space turned
  into a hyphen; a slug seen before in the same file gets -1, -2, … Explicit HTML anchors
  (`<a name="x">`, `id="x"`) count too.

Prints each broken link with its file and line, and exits 1 if there is any; otherwise prints
`links: N checked, 0 broken`. Run from anywhere; standard library only.
"""
import os
import re
import sys
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); text may hold one level of nested brackets.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
HTML_ID = re.compile(r"<[a-z][^>]*\bid\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files():
    files = [os.path.join(ROOT, "README.md")]
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    return [f for f in files if os.path.isfile(f)]


def prose_lines(text):
    """Yields (line number, line) outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), start=1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                continue
            yield number, line
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) and line.strip() == match.group(1):
            fence = None


def heading_text(raw):
    """The text GitHub renders for a heading's Markdown."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", raw)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = INLINE_CODE.sub(lambda m: m.group(2).strip(), text)
    text = re.sub(r"(\*{1,3})(\S(?:.*?\S)?)\1", r"\2", text)  # emphasis with *
    text = re.sub(r"(?<![0-9A-Za-z])(_{1,3})(\S(?:.*?\S)?)\1(?![0-9A-Za-z])", r"\2", text)  # with _, not inside words
    return text


def slug(text):
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


anchor_cache = {}


def anchors(path):
    if path in anchor_cache:
        return anchor_cache[path]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found, seen = set(), {}
    previous = None
    for _, line in prose_lines(text):
        match = HEADING.match(line)
        setext = SETEXT.match(line)
        title = None
        if match:
            title = match.group(2)
        elif setext and previous and previous.strip() and not HEADING.match(previous):
            title = previous.strip()
        if title is not None:
            base = slug(heading_text(title))
            n = seen.get(base, 0)
            found.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
        for html in HTML_ANCHOR.findall(line) + HTML_ID.findall(line):
            found.add(html)
        previous = line
    anchor_cache[path] = found
    return found


def links(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, line in prose_lines(text):
        stripped = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)
        for match in INLINE_LINK.finditer(stripped):
            yield number, match.group(1)
        reference = REFERENCE.match(stripped)
        if reference:
            yield number, reference.group(1)


def main():
    checked, broken = 0, []
    for path in markdown_files():
        shown = os.path.relpath(path, ROOT)
        for number, target in links(path):
            target = target.strip()
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            if not target or SCHEME.match(target) or target.startswith("//"):
                continue
            checked += 1
            location, _, fragment = target.partition("#")
            location = urllib.parse.unquote(location.split("?", 1)[0])
            if location:
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), location))
                if not os.path.exists(resolved):
                    broken.append(f"{shown}:{number}: {target}: no such file {os.path.relpath(resolved, ROOT)}")
                    continue
            else:
                resolved = path
            if fragment:
                if not resolved.endswith(".md") or not os.path.isfile(resolved):
                    broken.append(f"{shown}:{number}: {target}: an anchor into a file that is not Markdown")
                    continue
                if urllib.parse.unquote(fragment) not in anchors(resolved):
                    broken.append(f"{shown}:{number}: {target}: no heading '#{fragment}' in {os.path.relpath(resolved, ROOT)}")
    for line in broken:
        print(line)
    print(f"links: {checked} checked, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
