#!/bin/sh
# A fake a2a-embed for the tests: the protocol of
# agentwire_registry::embed::subprocess with a "model" of three concepts
# (weather, markets, anything else). FAKE_MODE, else the file fake-mode in
# the model's directory (`serve DIR`, `install --dir DIR ...`), picks a
# misbehaviour; FAKE_MARKER, else DIR/crashed, is the file of crash-once.
case "$1" in
    serve) dir="$2" ;;
    install) dir="$3" ;;
esac
mode="${FAKE_MODE:-$(cat "$dir/fake-mode" 2>/dev/null)}"
mode="${mode:-ok}"
FAKE_MARKER="${FAKE_MARKER:-$dir/crashed}"
if [ "$1" = install ]; then
    case "$mode" in
        install-fails) echo '{"error":"cannot download https://index.invalid/: refused","kind":"network"}'; exit 1 ;;
        *) echo '{"alreadyInstalled":true}'; exit 0 ;;
    esac
fi
if [ "$mode" = nohello ]; then
    echo '{"error":"config.json is not what was expected: it is a fake"}'
    exit 1
fi
# crash-always counts its starts, a line each, in FAKE_MARKER.
[ "$mode" = crash-always ] && echo start >>"$FAKE_MARKER"
echo '{"a2aEmbed":1,"model":"fake-concepts","dimensions":3,"modelId":"fake-concepts/3d/v1"}'
while IFS= read -r line; do
    case "$mode" in
        hang) continue ;;
        garbage) echo 'this is not json'; continue ;;
        crash-once)
            if [ ! -e "$FAKE_MARKER" ]; then
                : >"$FAKE_MARKER"
                exit 3
            fi ;;
        short) echo '{"vectors":[]}'; continue ;;
        crash-always) exit 3 ;;
        slow) sleep 1 ;;
    esac
    printf '%s\n' "$line" | awk '
function vec(t) {
    t = tolower(t)
    if (t ~ /cold|warm|rain|weather|forecast|temperature|chilly|umbrella/) return "[1,0,0.1]"
    if (t ~ /stock|nasdaq|share|price|market|ticker/) return "[0,1,0.1]"
    return "[0,0,1]"
}
{
    line = $0; out = ""; n = 0
    sub(/^[^[]*\[/, "", line)
    while (match(line, /"([^"\\]|\\.)*"/)) {
        out = out (n++ ? "," : "") vec(substr(line, RSTART + 1, RLENGTH - 2))
        line = substr(line, RSTART + RLENGTH)
    }
    print "{\"vectors\":[" out "]}"
}'
done
