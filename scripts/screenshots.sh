#!/usr/bin/env bash
# Makes the README's pictures: doc/view.png (coprof view in tmux, its pane turned
# into HTML and drawn by headless chromium) and doc/snakeviz.png (snakeviz's page on
# the same coprof file, in headless chromium).
# usage: scripts/screenshots.sh [BUILD]   (BUILD defaults to build; needs tmux,
# chromium, and snakeviz in BUILD/venv-snakeviz or /work/main/build/venv-snakeviz)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
coprof=$build/viewer/coprof
tmp=$(mktemp -d)
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null
	tmux -L coprof-shots kill-server 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

"$coprof" record -c wall -o "$tmp/worker.pstat" -- python3 samples/python/worker.py >/dev/null

# chromium URL PNG WIDTH HEIGHT: one headless screenshot, JavaScript given 8 s.
shoot() {
	chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
		--user-data-dir="$tmp/chromium" --window-size="$3,$4" \
		--virtual-time-budget=8000 --screenshot="$2" "$1" >/dev/null 2>&1
}

# coprof view at 100x30: the whole-program tree (W), captured with its colours.
tmux -L coprof-shots new-session -d -x 100 -y 30 -e TERM=xterm-256color \
	"$coprof view $tmp/worker.pstat"
sleep 1
tmux -L coprof-shots send-keys W
sleep 1
tmux -L coprof-shots capture-pane -e -p >"$tmp/view.ansi"
python3 - "$tmp/view.ansi" "$tmp/view.html" <<'PY'
# The pane's SGR escapes (bold, reverse, 8/256 colours) as HTML spans.
import html, re, sys
BASE = ["#000", "#c33", "#3a3", "#c90", "#36c", "#a3a", "#399", "#ccc",
        "#666", "#f55", "#5d5", "#fd5", "#69f", "#d6d", "#6dd", "#fff"]
def colour(n):
    if n < 16:
        return BASE[n]
    if n < 232:
        n -= 16
        return "#%02x%02x%02x" % tuple(0 if c == 0 else 55 + 40 * c for c in (n // 36, n // 6 % 6, n % 6))
    g = 8 + 10 * (n - 232)
    return "#%02x%02x%02x" % (g, g, g)
fg = bg = None
bold = rev = False
out = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace").read().split("\n"):
    row = []
    for tok in re.split(r"(\x1b\[[0-9;]*m)", line):
        m = re.fullmatch(r"\x1b\[([0-9;]*)m", tok)
        if m:
            codes = [int(c) for c in m.group(1).split(";") if c] or [0]
            i = 0
            while i < len(codes):
                c = codes[i]
                if c == 0: fg = bg = None; bold = rev = False
                elif c == 1: bold = True
                elif c == 7: rev = True
                elif c == 22: bold = False
                elif c == 27: rev = False
                elif 30 <= c <= 37: fg = BASE[c - 30]
                elif 90 <= c <= 97: fg = BASE[c - 82]
                elif 40 <= c <= 47: bg = BASE[c - 40]
                elif 100 <= c <= 107: bg = BASE[c - 92]
                elif c == 39: fg = None
                elif c == 49: bg = None
                elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                    if c == 38: fg = colour(codes[i + 2])
                    else: bg = colour(codes[i + 2])
                    i += 2
                i += 1
            continue
        if not tok:
            continue
        f, b = fg or "#ddd", bg or "#1e1e1e"
        if rev:
            f, b = b, f
        style = "color:%s;background:%s;%s" % (f, b, "font-weight:bold" if bold else "")
        row.append('<span style="%s">%s</span>' % (style, html.escape(tok)))
    out.append("".join(row))
open(sys.argv[2], "w").write(
    "<html><body style='margin:0;background:#1e1e1e'><pre style='margin:8px;"
    "font:15px/1.25 DejaVu Sans Mono,monospace;color:#ddd'>" + "\n".join(out) + "</pre></body></html>")
PY
shoot "file://$tmp/view.html" doc/view.png 940 590

# snakeviz on the same file, with its own server.
venv=$build/venv-snakeviz
[ -x "$venv/bin/snakeviz" ] || venv=/work/main/build/venv-snakeviz
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/python" -m snakeviz -s -H 127.0.0.1 -p "$port" "$tmp/worker.pstat" >"$tmp/snakeviz.log" 2>&1 &
server=$!
for _ in $(seq 50); do
	curl -sf "http://127.0.0.1:$port/" >/dev/null 2>&1 && break
	sleep 0.2
done
url="http://127.0.0.1:$port/snakeviz/$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$tmp/worker.pstat")"
# Through selenium and chromium-driver, as tests/snakeviz does: the icicle is drawn by
# script after the page loads, which a plain --screenshot does not wait for.
"$venv/bin/python" - "$url" doc/snakeviz.png "$tmp/chromium" <<'PY'
import sys, time
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait
url, png, profile = sys.argv[1:4]
opts = webdriver.ChromeOptions()
opts.binary_location = "/usr/bin/chromium"
for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
          "--hide-scrollbars", "--window-size=1400,760", "--user-data-dir=" + profile):
    opts.add_argument(a)
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
try:
    d.get(url)
    WebDriverWait(d, 60, 0.2).until(lambda d: d.execute_script(
        "return document.querySelectorAll('#chart svg rect').length > 1"))
    time.sleep(1)
    d.save_screenshot(png)
finally:
    d.quit()
PY
ls -l doc/view.png doc/snakeviz.png
