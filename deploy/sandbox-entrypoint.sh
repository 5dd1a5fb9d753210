#!/bin/sh
# Entry point of the sandbox image: make the cgroup hierarchy writable, then exec the service.
#
# Kubernetes and Docker mount /sys/fs/cgroup read-only in unprivileged containers. The sandbox gives every
# slot its own memory/pids cgroup under the service's cgroup, so it needs its subtree writable; with
# CAP_SYS_ADMIN (granted in deploy/k8s) a remount inside the container's own mount namespace does that
# without touching the host's view. Nothing else is changed.
set -eu
if [ -r /proc/self/mountinfo ]; then
    awk '$5 ~ "^/sys/fs/cgroup" && $6 ~ /(^|,)ro(,|$)/ {print $5}' /proc/self/mountinfo |
        while read -r mountpoint; do
            mount -o remount,rw "$mountpoint"
        done
fi
exec "$@"
