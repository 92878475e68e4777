#!/usr/bin/env bash
# Regenerates docs/live.png, the README's picture of the `lnetcap live` terminal view:
# the view runs in tmux on a lab capture replayed at half speed (three clients writing to
# one server), the second pair's detail pane open; tmux's capture (with its colours) is
# turned into HTML and photographed by headless Chromium.
# Needs tmux, chromium, python3 and a release build (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/lnetcap
work=$(mktemp -d)
trap 'tmux -S "$work/sock" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
tmux -S "$work/sock" new-session -d -x 150 -y 20 \
  "$bin live --replay fixtures/lab/lst_write_rtt30_c8_pc8_3clients_discovery/trace.pcap.zst --speed 0.5; sleep 30"
sleep 4
tmux -S "$work/sock" send-keys Down Enter
sleep 2
tmux -S "$work/sock" capture-pane -e -p > "$work/pane.ansi"
python3 - "$work/pane.ansi" "$work/pane.html" <<'PY'
import html, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
out, style = [], {}
colours = {"31": "#e06c75", "32": "#98c379", "33": "#e5c07b", "34": "#61afef", "36": "#56b6c2"}
def span(s):
    css = []
    if style.get("bold"): css.append("font-weight:bold")
    if style.get("dim"): css.append("opacity:0.6")
    if style.get("underline"): css.append("text-decoration:underline")
    fg = style.get("fg", "#d7dae0")
    if style.get("reverse"): css.append(f"background:{fg};color:#1e2127")
    else: css.append(f"color:{fg}")
    return f'<span style="{";".join(css)}">{html.escape(s)}</span>'
for part in re.split(r"(\x1b\[[0-9;]*m)", text):
    m = re.fullmatch(r"\x1b\[([0-9;]*)m", part)
    if not m:
        if part: out.append(span(part))
        continue
    for code in (m.group(1) or "0").split(";"):
        if code in ("", "0"): style = {}
        elif code == "1": style["bold"] = True
        elif code == "2": style["dim"] = True
        elif code == "4": style["underline"] = True
        elif code == "7": style["reverse"] = True
        elif code in ("22",): style.pop("bold", None); style.pop("dim", None)
        elif code in ("24",): style.pop("underline", None)
        elif code in ("27",): style.pop("reverse", None)
        elif code in colours: style["fg"] = colours[code]
        elif code == "39": style.pop("fg", None)
open(sys.argv[2], "w", encoding="utf-8").write(
    '<!doctype html><meta charset="utf-8"><body style="margin:0;background:#1e2127">'
    '<pre style="margin:12px;font:13px/1.25 \'DejaVu Sans Mono\',monospace;color:#d7dae0">'
    + "".join(out) + "</pre></body>")
PY
chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size=1250,365 --screenshot=docs/live.png "file://$work/pane.html" 2>/dev/null
echo "wrote docs/live.png"
