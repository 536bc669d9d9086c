#!/bin/sh
# Runs as root inside the base rootfs (chroot, /proc /sys /dev mounted) after
# the packages are installed. Keep it idempotent: a rebuild runs it again.
set -eu

# E2B convention: default user "user" (1000:1000), home /home/user, with
# passwordless sudo. The password stays locked; nobody logs in over a tty.
getent group user >/dev/null || groupadd --gid 1000 user
getent passwd user >/dev/null ||
    useradd --uid 1000 --gid 1000 --create-home --home-dir /home/user \
        --shell /bin/bash --groups sudo user
printf 'user ALL=(ALL:ALL) NOPASSWD: ALL\n' >/etc/sudoers.d/user
chmod 0440 /etc/sudoers.d/user

# Identity. The node re-identifies each clone (new hostname, ...); these are
# the template's defaults, matching the hostname field of the ip= parameter.
echo sandbox >/etc/hostname
cat >/etc/hosts <<'HOSTS'
127.0.0.1	localhost
127.0.1.1	sandbox
::1	localhost ip6-localhost ip6-loopback
HOSTS
# The guest's only resolver is the gateway end of its tap (the node's DNS
# proxy); mmdebstrap copied the build host's resolv.conf, never keep that.
echo 'nameserver 169.254.0.1' >/etc/resolv.conf
echo 'LANG=C.UTF-8' >/etc/default/locale

# The agent writes /run/e2b/.E2B_* (tools/template-build.sh keeps this
# directory although mmdebstrap empties /run). If PID 1 mounts a tmpfs on
# /run, it has to recreate it.
mkdir -p /run/e2b
chmod 0755 /run/e2b
