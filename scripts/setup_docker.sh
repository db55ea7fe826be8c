#!/usr/bin/env bash
# Make a Docker engine answer on this machine; safe to run again.
#
# Installs docker.io (apt) when dockerd is missing, starts dockerd in the background when
# `docker info` does not answer, and waits up to SETUP_DOCKER_WAIT seconds (default 60).
# Exits non-zero, saying why, when the daemon cannot be brought up.
set -euo pipefail

WAIT="${SETUP_DOCKER_WAIT:-60}"
LOG="${DOCKERD_LOG:-/var/log/verify-cli-dockerd.log}"
say() { echo "setup_docker: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run this script as root"
    SUDO="sudo"
fi

answers() { docker info >/dev/null 2>&1 || $SUDO docker info >/dev/null 2>&1; }

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "dockerd is missing and apt-get is not available: install Docker Engine (https://docs.docker.com/engine/install/)"
    say "installing docker.io with apt-get"
    $SUDO apt-get update -q || die "apt-get update failed"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io \
        || die "apt-get install docker.io failed"
fi

# The images are built offline where no registry answers: that needs debootstrap.
if ! command -v debootstrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    say "installing debootstrap with apt-get (offline image builds)"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null \
        || { $SUDO apt-get update -q && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null; } \
        || die "apt-get install debootstrap failed"
fi

if answers; then
    say "Docker daemon is running ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo ok))"
    exit 0
fi

if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    say "starting docker with systemctl"
    $SUDO systemctl start docker || say "systemctl start docker failed; starting dockerd directly"
fi
# A daemon that died (killed, crashed) leaves its pid file; while its process is a zombie that
# nobody has reaped yet, a new dockerd refuses to start ("pid file found").
PIDFILE=/var/run/docker.pid
if ! answers && [ -f "$PIDFILE" ]; then
    old=$(cat "$PIDFILE" 2>/dev/null || true)
    # gone: no pid, no such process, or a zombie
    gone() { [ -z "$old" ] || ! state=$(awk '{print $3}' "/proc/$old/stat" 2>/dev/null) || [ "$state" = Z ]; }
    for _ in $(seq 10); do  # a daemon killed a moment ago takes a moment to go
        if gone; then break; fi
        sleep 1
    done
    if gone; then
        say "removing the pid file of a daemon that is gone (pid ${old:-?})"
        $SUDO rm -f "$PIDFILE"
        # and the containerd it started, which outlives it and keeps a new one from starting
        cpid=$(cat /var/run/docker/containerd/containerd.pid 2>/dev/null || true)
        if [ -n "$cpid" ] && grep -q containerd "/proc/$cpid/comm" 2>/dev/null; then
            say "stopping the containerd of the daemon that is gone (pid $cpid)"
            $SUDO kill "$cpid" 2>/dev/null || true
            for _ in $(seq 10); do [ -d "/proc/$cpid" ] || break; sleep 1; done
            $SUDO kill -9 "$cpid" 2>/dev/null || true
        fi
    fi
fi
if ! answers; then
    say "starting dockerd in the background (log: $LOG)"
    $SUDO mkdir -p "$(dirname "$LOG")"
    # setsid: its own session, so that the end of this shell (or CI step) does not take it along
    if command -v setsid >/dev/null 2>&1; then
        $SUDO sh -c "setsid nohup dockerd >>'$LOG' 2>&1 </dev/null &"
    else
        $SUDO sh -c "nohup dockerd >>'$LOG' 2>&1 </dev/null &"
    fi
fi

for _ in $(seq "$WAIT"); do
    if answers; then
        say "Docker daemon is running"
        if [ -n "$SUDO" ] && ! docker info >/dev/null 2>&1; then
            say "note: $(id -un) cannot use /var/run/docker.sock; add it to the docker group"
        fi
        exit 0
    fi
    sleep 1
done
say "last lines of $LOG:"
$SUDO tail -n 20 "$LOG" >&2 2>/dev/null || true
die "the Docker daemon did not answer within ${WAIT}s (see $LOG)"
