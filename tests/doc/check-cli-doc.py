#!/usr/bin/env python3
"""check-cli-doc.py: the help and the man page agree with the code, both ways.

usage: check-cli-doc.py SOURCE_ROOT COPROF MAN_PAGE

From the code (viewer/main.c's command table, each viewer/cmd-NAME.c's getopt
option table and optstring, and the values its --format handling compares) it
derives every command, option and format, then checks that:
- `coprof --help` lists exactly the commands, and names exactly each command's
  formats in its parenthesis;
- `coprof CMD --help` names every long option and every format, and nothing else;
- the man page has a subsection 'coprof CMD' per command, whose option lines (.TP
  tags) name every long and short option and nothing else, and which names every
  format.
Exits 1 with one line per disagreement.
"""
import os
import re
import subprocess
import sys

errors = []


def fail(msg):
    errors.append(msg)


def code_commands(root):
    src = open(os.path.join(root, "viewer/main.c")).read()
    table = re.search(r"commands\[\]\s*=\s*\{(.*?)\n\};", src, re.S).group(1)
    return re.findall(r'\{"([a-z]+)",\s*vw_cmd_\w+,\s*"([^"]*)"\}', table)


def code_options(root, cmd):
    """Long options, short options and --format values of one command, from its source."""
    src = open(os.path.join(root, "viewer/cmd-%s.c" % cmd)).read()
    table = re.search(r"struct option opts\[\]\s*=\s*\{(.*?)\n\t\};", src, re.S).group(1)
    longs = set(re.findall(r'\{"([a-z-]+)",\s*\w+_argument', table))
    optstring = re.search(r'(?:getopt_long|vw_cli_opt)\(argc, argv, "([^"]*)"', src).group(1)
    shorts = set(ch for ch in optstring if ch.isalpha())
    # The short option the --format case handles, then the literals it compares.
    formats = set()
    fmt = re.search(r'\{"format",\s*required_argument,\s*NULL,\s*\'(.)\'\}', table)
    if fmt:
        case = re.search(r"case '%s':(.*?)(?:\n\t\tcase |\n\t\tdefault:|\n\t\t\})" % fmt.group(1), src, re.S)
        body = case.group(1)
        formats |= set(re.findall(r'strcmp\(optarg, "([a-z]+)"\)', body))
        var = re.search(r"(\w+) = optarg;", body)
        if var:
            formats |= set(re.findall(r'strcmp\(%s, "([a-z]+)"\)' % var.group(1), src))
    return longs - {"help"}, shorts - {"h"}, formats


def run(*args):
    return subprocess.run(args, capture_output=True, text=True).stdout


def man_sections(path):
    """{subsection title: its roff text} of the man page, font escapes removed."""
    text = open(path).read()
    text = re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-").replace("\\&", "")
    parts = re.split(r'^\.SS "?(.*?)"?$', text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def option_tags(section):
    return [m for m in re.findall(r"^\.TP\n(.*)$", section, re.M)]


def main():
    root, coprof, man = sys.argv[1:4]
    commands = code_commands(root)
    names = [c for c, _ in commands]
    top = run(coprof, "--help")
    listed = re.findall(r"^  ([a-z]+)\s", top, re.M)
    if sorted(listed) != sorted(names):
        fail("coprof --help lists %s, the code has %s" % (listed, names))
    sections = man_sections(man)
    for cmd, line in commands:
        longs, shorts, formats = code_options(root, cmd)
        # The top help's parenthesis names the formats.
        paren = re.search(r"^  %s\s.*\(([^)]*)\)" % cmd, top, re.M)
        named = set(re.findall(r"[a-z]+", paren.group(1))) if paren else set()
        if formats and named != formats:
            fail("coprof --help names formats %s for %s, the code has %s"
                 % (sorted(named), cmd, sorted(formats)))
        # The command's own help.
        helptext = run(coprof, cmd, "--help")
        help_longs = set(re.findall(r"(?<![\w-])--([a-z][a-z-]*)", helptext))
        for o in sorted(longs - help_longs):
            fail("coprof %s --help does not name --%s" % (cmd, o))
        for o in sorted(help_longs - longs):
            fail("coprof %s --help names --%s, which the code lacks" % (cmd, o))
        help_formats = set()
        for m in re.findall(r"--format ([a-z|]+)", helptext):
            help_formats |= set(m.split("|"))
        if formats != help_formats:
            fail("coprof %s --help names formats %s, the code has %s"
                 % (cmd, sorted(help_formats), sorted(formats)))
        # The man page: one subsection per command, one option line per option.
        title = "coprof " + cmd
        if title not in sections:
            fail("the man page has no subsection '%s'" % title)
            continue
        tags = option_tags(sections[title])
        man_longs = set(re.findall(r"(?<![\w-])--([a-z][a-z-]*)", " ".join(tags)))
        man_shorts = set(re.findall(r"(?<![\w-])-([a-zA-Z])\b", " ".join(tags)))
        for o in sorted(longs - man_longs):
            fail("the man page has no option line for coprof %s --%s" % (cmd, o))
        for o in sorted(man_longs - longs):
            fail("the man page has a line for coprof %s --%s, which the code lacks" % (cmd, o))
        for o in sorted(shorts - man_shorts):
            fail("the man page has no option line for coprof %s -%s" % (cmd, o))
        for o in sorted(man_shorts - shorts):
            fail("the man page has a line for coprof %s -%s, which the code lacks" % (cmd, o))
        for f in sorted(formats):
            if not re.search(r"(?<![\w-])%s(?![\w-])" % f, sections[title]):
                fail("the man page's coprof %s does not name the format %s" % (cmd, f))
    for title in sections:
        m = re.fullmatch(r"coprof ([a-z]+)", title)
        if m and m.group(1) not in names:
            fail("the man page documents coprof %s, which the code lacks" % m.group(1))
    for e in errors:
        print(e)
    if not errors:
        print("%d commands: help and man page agree with the code" % len(commands))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
