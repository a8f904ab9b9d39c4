#!/usr/bin/env bash
# Release artifacts of the `a2a` command, from one release build (and
# `a2a-embed`, the program beside it that runs the sentence-embedding model
# for `a2a registry serve`, built on its own: the package agentwire-embed,
# which needs agentwire-registry's feature `semantic`, so that `a2a` is
# built without it):
#
#   scripts/release.sh archive   # dist/a2a-<version>-<target>.tar.gz (+ .sha256)
#   scripts/release.sh image     # the container image agentwire/a2a:<version> (podman)
#   scripts/release.sh all       # both
#
# archive: the binaries (a2a, a2a-embed), LICENSE, README.md, shell completions (bash, zsh,
# fish: `a2a completion SHELL`) and the manual pages generated from the
# command's clap definitions (`a2a man --dir`), packed as
# a2a-<version>-<target>/...; the archive is then unpacked in a temporary
# directory and its binary run (`a2a --version`, `a2a completion bash`)
# (and `a2a-embed --version`) and its manual page rendered (`man -l`, when man is installed).
#
# image: stages the image's root in target/container (the binaries; the
# dynamic loader and the libraries `ldd` lists for them; CA certificates;
# /etc/passwd and /etc/group with the user a2a, uid 10001; an empty /data
# owned by it, and /tmp) and builds ./Containerfile FROM scratch with
# `podman build --format docker` (the docker format keeps HEALTHCHECK).
# Nothing is pulled. `scripts/container-check.sh` runs the image.
#
# Settings (environment):
#   RELEASE_SKIP_BUILD=1   use target/release/a2a and a2a-embed as they are (no cargo build)
#   RELEASE_OUT=DIR        where the archive goes (default: dist)
#   RELEASE_IMAGE=NAME     the image's name (default: agentwire/a2a:<version>)
#
# Exit status: 0; 1 when a check of the unpacked archive or the build of
# the image failed; 2 on a usage or setup error.
set -euo pipefail

cd "$(dirname "$0")/.."
what="${1:-all}"
case "$what" in
    archive | image | all) ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "usage: scripts/release.sh [archive|image|all]" >&2
        exit 2
        ;;
esac

target_dir="${CARGO_TARGET_DIR:-target}"
bin="$target_dir/release/a2a"
embed_bin="$target_dir/release/a2a-embed"
if [[ "${RELEASE_SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release --locked -p agentwire-cli --bin a2a >&2 || exit 2
    # Its own build: in the same one, cargo would unify the features of
    # agentwire-registry and build `a2a` with the model's code too.
    cargo build --release --locked -p agentwire-embed --bin a2a-embed >&2 || exit 2
fi
if [[ ! -x "$bin" ]]; then
    echo "release.sh: $bin does not exist (cargo build --release -p agentwire-cli)" >&2
    exit 2
fi
if [[ ! -x "$embed_bin" ]]; then
    echo "release.sh: $embed_bin does not exist (cargo build --release -p agentwire-embed)" >&2
    exit 2
fi

# "a2a 0.1.0" -> 0.1.0
version="$("$bin" --version | awk '{print $2}')"
triple="$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')"
triple="${triple:-$(uname -m)-unknown-linux-gnu}"
name="a2a-$version-$triple"
echo "a2a $version ($triple): $(stat -c %s "$bin") bytes"
echo "a2a-embed: $(stat -c %s "$embed_bin") bytes"

build_archive() {
    local out="${RELEASE_OUT:-dist}"
    local stage
    stage="$(mktemp -d)"
    local root="$stage/$name"
    mkdir -p "$root/completions" "$root/man/man1" "$out"
    install -m 0755 "$bin" "$root/a2a"
    install -m 0755 "$embed_bin" "$root/a2a-embed"
    install -m 0644 LICENSE README.md "$root/"
    "$bin" completion bash >"$root/completions/a2a.bash"
    "$bin" completion zsh >"$root/completions/_a2a"
    "$bin" completion fish >"$root/completions/a2a.fish"
    "$bin" man --dir "$root/man/man1"
    local archive="$out/$name.tar.gz"
    # Reproducible order and owners.
    tar --sort=name --owner=0 --group=0 --numeric-owner -C "$stage" -czf "$archive" "$name"
    (cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
    rm -rf "$stage"
    echo "archive: $archive ($(stat -c %s "$archive") bytes)"
    tar -tzf "$archive" | sed 's/^/  /'

    # The archive as a user gets it: unpacked elsewhere, its binary run.
    local check
    check="$(mktemp -d)"
    tar -xzf "$archive" -C "$check"
    local got
    got="$("$check/$name/a2a" --version)"
    echo "unpacked: $got"
    if [[ "$got" != "a2a $version" ]]; then
        echo "release.sh: the unpacked a2a printed '$got'" >&2
        exit 1
    fi
    got="$("$check/$name/a2a-embed" --version)"
    echo "unpacked: $got"
    if [[ "$got" != "a2a-embed $version" ]]; then
        echo "release.sh: the unpacked a2a-embed printed '$got'" >&2
        exit 1
    fi
    grep -q 'complete' "$check/$name/completions/a2a.bash" || {
        echo "release.sh: the bash completion script is empty" >&2
        exit 1
    }
    if command -v man >/dev/null 2>&1; then
        MANWIDTH=80 man -l "$check/$name/man/man1/a2a.1" 2>/dev/null | cat >"$check/a2a.txt"
        MANWIDTH=80 man -l "$check/$name/man/man1/a2a-serve.1" 2>/dev/null | cat >"$check/serve.txt"
        if ! grep -q 'a2a' "$check/a2a.txt" || ! grep -q -- '--store' "$check/serve.txt"; then
            echo "release.sh: man -l did not render the manual pages" >&2
            exit 1
        fi
        echo "man -l a2a.1: $(wc -l <"$check/a2a.txt") lines; a2a-serve.1: $(wc -l <"$check/serve.txt") lines"
    else
        echo "man is not installed: the manual pages were not rendered"
    fi
    rm -rf "$check"
}

build_image() {
    if ! command -v podman >/dev/null 2>&1; then
        echo "release.sh: podman is not installed (apt-get install podman)" >&2
        exit 2
    fi
    local image="${RELEASE_IMAGE:-agentwire/a2a:$version}"
    local ctx="$target_dir/container"
    rm -rf "$ctx"
    mkdir -p "$ctx/root/usr/local/bin" "$ctx/root/etc/ssl/certs" "$ctx/root/tmp" "$ctx/data"
    install -m 0755 "$bin" "$ctx/root/usr/local/bin/a2a"
    # Beside a2a: `a2a registry serve` finds it there.
    install -m 0755 "$embed_bin" "$ctx/root/usr/local/bin/a2a-embed"
    # The dynamic loader and every library the binaries load, at the paths
    # ldd resolves (symbolic links followed: the files themselves).
    local lib
    for lib in $( (ldd "$bin"; ldd "$embed_bin") | grep -o '/[^ ]*' | sort -u); do
        mkdir -p "$ctx/root$(dirname "$lib")"
        cp -L "$lib" "$ctx/root$lib"
    done
    local ca=/etc/ssl/certs/ca-certificates.crt
    if [[ ! -f "$ca" ]]; then
        echo "release.sh: $ca is missing (apt-get install ca-certificates)" >&2
        exit 2
    fi
    cp -L "$ca" "$ctx/root/etc/ssl/certs/ca-certificates.crt"
    printf 'root:x:0:0:root:/root:/sbin/nologin\na2a:x:10001:10001:a2a:/data:/sbin/nologin\n' >"$ctx/root/etc/passwd"
    printf 'root:x:0:\na2a:x:10001:\n' >"$ctx/root/etc/group"
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$ctx/root/etc/nsswitch.conf"
    chmod 1777 "$ctx/root/tmp"
    podman build --format docker -f Containerfile -t "$image" "$ctx" >&2 || exit 1
    echo "image: $image ($(podman image inspect "$image" --format '{{.Size}}') bytes)"
}

case "$what" in
    archive) build_archive ;;
    image) build_image ;;
    all)
        build_archive
        build_image
        ;;
esac
