#!/usr/bin/env python3
"""md2man.py: turns the markdown of doc/ into one man page (roff), at build time.

usage: md2man.py --name NAME --section N --version V -o OUT FILE.md...

Only the markdown subset doc/ uses is understood: '#'-'###' headings, paragraphs,
'-' lists (one level; continuation lines indented), option lists (a list item that
starts with `term`[, `term`...] and a colon), fenced code blocks, pipe tables,
`code`, **bold**, *italic*, [text](link) and images (dropped). Each file's '#'
heading becomes a section (.SH), '##' and '###' subsections (.SS). A line
'<!-- man: skip -->' leaves out the rest of its file, '<!-- man: end-skip -->'
ends that.
"""
import argparse
import re
import sys

OPTION_ITEM = re.compile(r"^((?:`[^`]+`(?:, | or )?)+):\s+(.*)$")
HEADING = re.compile(r"^(#{1,3})\s+(.*)$")


def escape(text):
    """Escapes roff's special characters in plain text."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def inline(text):
    """Converts inline markdown to roff font changes."""
    out = []
    pos = 0
    # Code spans first: nothing inside them is markdown.
    for m in re.finditer(r"`([^`]+)`", text):
        out.append(inline_plain(text[pos : m.start()]))
        out.append("\\fB" + escape(m.group(1)) + "\\fR")
        pos = m.end()
    out.append(inline_plain(text[pos:]))
    return "".join(out)


def inline_plain(text):
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)
    text = escape(text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\\fI\1\\fR", text)
    return text


def line_safe(text):
    """A roff text line must not start with a control character."""
    return "\\&" + text if text[:1] in (".", "'") else text


def convert(lines, out):
    para = []
    mode = None  # None, 'list' (an item open) or 'option'

    def flush():
        nonlocal para
        if para:
            out.append(line_safe(inline(" ".join(s.strip() for s in para))))
            para = []

    i = 0
    skipping = False
    while i < len(lines):
        line = lines[i].rstrip("\n")
        i += 1
        if line.strip() == "<!-- man: skip -->":
            flush()
            skipping = True
            continue
        if line.strip() == "<!-- man: end-skip -->":
            skipping = False
            continue
        if skipping:
            continue
        if line.lstrip().startswith("<!--"):
            while "-->" not in line and i < len(lines):
                line = lines[i]
                i += 1
            continue
        if re.fullmatch(r"\s*!\[[^\]]*\]\([^)]*\)\s*", line):
            continue  # a picture: nothing to say in a terminal
        if line.startswith("```"):
            flush()
            out.append(".PP")
            out.append(".RS 2")
            out.append(".nf")
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(line_safe(escape(lines[i].rstrip("\n"))))
                i += 1
            i += 1
            out.append(".fi")
            out.append(".RE")
            mode = None
            continue
        m = HEADING.match(line)
        if m:
            flush()
            title = m.group(2).strip()
            if len(m.group(1)) == 1:
                out.append(".SH " + escape(re.sub(r"`", "", title)).upper())
            else:
                out.append('.SS "' + escape(re.sub(r"`", "", title)) + '"')
            mode = None
            continue
        if line.startswith("|"):
            # A tbl(1) table; each cell a text block, so long cells wrap.
            flush()
            rows = []
            while True:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                    rows.append(cells)
                if i >= len(lines) or not lines[i].startswith("|"):
                    break
                line = lines[i].rstrip("\n")
                i += 1
            out.append(".PP")
            out.append(".TS")
            out.append("tab(@);")
            out.append(" ".join(["lb"] * len(rows[0])))
            out.append(" ".join(["lx"] * len(rows[0])) + ".")
            for cells in rows:
                out.append("@".join("T{\n%s\nT}" % line_safe(inline(c)) for c in cells))
            out.append(".TE")
            mode = None
            continue
        if not line.strip():
            flush()
            continue
        if line.startswith("- "):
            flush()
            item = line[2:]
            m = OPTION_ITEM.match(item)
            if m:
                out.append(".TP")
                out.append(line_safe(inline(m.group(1))))
                para = [m.group(2)]
                mode = "option"
            else:
                out.append(".IP \\(bu 2")
                para = [item]
                mode = "list"
            continue
        if mode and line.startswith("  "):
            para.append(line)
            continue
        if not para:
            if mode:
                out.append(".PP")
                mode = None
            elif out and not out[-1].startswith((".SH", ".SS", ".TH")):
                out.append(".PP")
        para.append(line)
    flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--section", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    out = [
        "'\\\" t",  # tells man(1) to run tbl(1)
        '.TH %s %s "" "%s %s" "User Commands"'
        % (a.name.upper(), a.section, a.name, a.version)
    ]
    for path in a.files:
        with open(path, encoding="utf-8") as f:
            convert(f.readlines(), out)
    text = "\n".join(out) + "\n"
    with open(a.output, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
