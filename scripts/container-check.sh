#!/usr/bin/env bash
# Runs the image that `scripts/release.sh image` built and reaches its
# /healthz: the container (non-root, SQLite store on a fresh volume) is
# started with its port published on 127.0.0.1 only, /healthz is fetched
# from the host and the image's own HEALTHCHECK is run (`podman healthcheck
# run`), a message is sent through it, and the store's file is checked on
# the volume. Everything is removed at the end.
#
#   scripts/container-check.sh [IMAGE]    # default: agentwire/a2a:<version of target/release/a2a>
#
# Runtimes: podman's default OCI runtime needs cgroups; on a machine where
# it refuses (cgroups v1/hybrid, limits it may not set) the script uses runc
# when installed, else crun with --cgroups=disabled and explicit --ulimit
# values, and when every runtime refuses, the image's root exported and
# run with chroot as the image's user (the same files, the same command).
#
# Settings (environment): CHECK_PORT (default 18380), the host port.
# Exit status: 0 /healthz answered; 1 it did not; 2 setup error.
set -euo pipefail

cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-target}"
bin="$target_dir/release/a2a"
port="${CHECK_PORT:-18380}"
image="${1:-}"
if [[ -z "$image" ]]; then
    [[ -x "$bin" ]] || {
        echo "container-check.sh: no IMAGE and no $bin" >&2
        exit 2
    }
    image="agentwire/a2a:$("$bin" --version | awk '{print $2}')"
fi
podman image exists "$image" || {
    echo "container-check.sh: no image $image (scripts/release.sh image)" >&2
    exit 2
}

name="a2a-check-$$"
volume="a2a-check-data-$$"
work="$(mktemp -d)"
cleanup() {
    podman rm -f -t 2 "$name" >/dev/null 2>&1 || true
    podman volume rm -f "$volume" >/dev/null 2>&1 || true
    if [[ -n "${chroot_pid:-}" ]]; then
        kill "$chroot_pid" 2>/dev/null || true
        wait "$chroot_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# GET http://127.0.0.1:$port/healthz until it answers (30 s at most).
wait_healthz() {
    local i
    for i in $(seq 1 60); do
        if command -v curl >/dev/null 2>&1; then
            if out="$(curl -sf "http://127.0.0.1:$port/healthz" 2>/dev/null)"; then
                echo "GET http://127.0.0.1:$port/healthz: 200 $out"
                return 0
            fi
        elif "$bin" healthcheck --url "http://127.0.0.1:$port/healthz" 2>/dev/null; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}

# The runtimes to try, in order: podman's options before `run` | after it.
tries=("|")
command -v runc >/dev/null 2>&1 && tries+=("--runtime runc|")
tries+=("|--cgroups=disabled")

started=""
for try in "${tries[@]}"; do
    global="${try%%|*}"
    local_opts="${try#*|}"
    podman rm -f "$name" >/dev/null 2>&1 || true
    podman volume rm -f "$volume" >/dev/null 2>&1 || true
    podman volume create "$volume" >/dev/null
    # shellcheck disable=SC2086 # the options are words
    if podman $global run -d --name "$name" $local_opts \
        --ulimit nofile=4096:4096 --ulimit nproc=1024:1024 \
        -p "127.0.0.1:$port:8080" -v "$volume:/data" "$image" >"$work/run.out" 2>&1; then
        sleep 1
        if [[ "$(podman inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" == true ]]; then
            started="podman $global run $local_opts"
            break
        fi
    fi
    echo "container-check.sh: 'podman $global run $local_opts' refused: $(tail -1 "$work/run.out")" >&2
done

if [[ -n "$started" ]]; then
    echo "running $image with '$started' (user $(podman inspect -f '{{.Config.User}}' "$name"))"
    if ! wait_healthz; then
        podman logs "$name" >&2 || true
        echo "container-check.sh: /healthz did not answer" >&2
        exit 1
    fi
    podman healthcheck run "$name" 2>/dev/null && echo "podman healthcheck run: healthy" || {
        echo "container-check.sh: the image's HEALTHCHECK failed" >&2
        exit 1
    }
    if [[ -x "$bin" ]]; then
        "$bin" send -a "http://127.0.0.1:$port" "hello from the host" >"$work/send.out"
        grep -q COMPLETED "$work/send.out" && echo "a2a send through the image: COMPLETED"
    fi
    db="$(podman volume inspect -f '{{.Mountpoint}}' "$volume")/a2a.db"
    ls -ln "$db"
    [[ "$(stat -c %u "$db")" == 10001 ]] || {
        echo "container-check.sh: $db is not owned by uid 10001" >&2
        exit 1
    }
    podman logs "$name" 2>&1 | tail -3
    exit 0
fi

# Every runtime refused: the image's root, run with chroot.
echo "every runtime refused: running the image's root with chroot"
cid="$(podman create "$image")"
mkdir "$work/root"
podman export "$cid" | tar -x -C "$work/root"
podman rm "$cid" >/dev/null
user="$(podman image inspect -f '{{.Config.User}}' "$image")"
env -i A2A_SERVE_HOST=127.0.0.1 A2A_SERVE_PORT="$port" HOME=/data \
    chroot --userspec="$user" "$work/root" /usr/local/bin/a2a serve --agent echo \
    --store sqlite:/data/a2a.db >"$work/serve.log" 2>&1 &
chroot_pid=$!
if ! wait_healthz; then
    cat "$work/serve.log" >&2
    exit 1
fi
env -i A2A_SERVE_PORT="$port" chroot --userspec="$user" "$work/root" /usr/local/bin/a2a healthcheck
ls -ln "$work/root/data/a2a.db"
