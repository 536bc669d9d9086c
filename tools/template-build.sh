#!/bin/bash
# template-build.sh: build a space guest template (kernel + root filesystem).
#
# Usage:
#   tools/template-build.sh --recipe templates/base --agent PATH --cache DIR --out DIR
#                           [--name NAME] [--kernel custom|debian] [--suite SUITE]
#                           [--mirror URL] [--kernel-only]
#
# Steps, each cached under --cache by the sha256 of its inputs and rebuilt only
# when those change (see docs/templates.md):
#   kernel   $CACHE/kernel/<key>/vmlinux         our tiny 6.1 kernel (PVH ELF)
#            key: templates/kernel/space-guest.config + linux-source-6.1 version
#                 + gcc version + the "kernel" section of this script
#   rootfs   $CACHE/rootfs-base/<key>/rootfs.tar  mmdebstrap minbase + packages
#            key: recipe packages + recipe setup.sh + suite + apt sources
#                 + the "rootfs" section of this script
#   image    $CACHE/image/<key>/rootfs.ext4       tar + agent -> sparse ext4
#            key: rootfs key + agent binary + the "image" section of this script
#   publish  --out DIR: vmlinux, rootfs.ext4, template.json, swapped in whole
#            (republished when the kernel, image or size changes)
#
# A recipe may have a `size` file, the template's default size (a create that
# gives none gets it; the node keeps one memory snapshot per size used):
#   vcpus=1
#   memory_mb=512
# Both keys, once each, nothing else (# comments and blank lines aside);
# vcpus 1..16, memory_mb 128..65536. Without the file: 1 vCPU, 512 MiB. They
# are written into template.json as "vcpus" and "memory_mb".
#
# --kernel-only builds (or finds) the kernel and prints its path on stdout.
# --kernel debian uses Debian's cloud kernel plus a small initramfs instead of
# our own kernel (fallback; that template needs microvm acpi=on and -initrd).
#
# Progress goes to stderr as "template: <step>: ..." lines. On success the
# template directory is printed on stdout. Needs root (mmdebstrap, chroot).

set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SELF")")
readonly SELF REPO
readonly KCONFIG_FRAGMENT="$REPO/templates/kernel/space-guest.config"
readonly LINUX_SOURCE_PKG=linux-source-6.1
readonly LINUX_SOURCE_TAR=/usr/src/linux-source-6.1.tar.xz

arg_recipe=
arg_agent=
arg_cache=
arg_out=
arg_name=
arg_kernel=custom
arg_suite=bookworm
arg_mirror=
arg_kernel_only=0

say() { printf 'template: %s\n' "$*" >&2; }
die() { printf 'template: error: %s\n' "$*" >&2; exit 1; }
short() { printf '%s' "${1:0:12}"; }

usage() {
    sed -n '4,7p' "$SELF" | sed 's/^# \{0,1\}//' >&2
    exit "${1:-2}"
}

# ---------------------------------------------------------------------------
# Cleanup. Every temporary directory is registered here and removed on any
# exit; mounts below it (mmdebstrap's chroot mounts, if it was killed) are
# unmounted first and rm never crosses into another file system.
# ---------------------------------------------------------------------------
tmp_dirs=()
bg_pgids=()

umount_below() {
    local dir=$1 m
    [ -d "$dir" ] || return 0
    # Deepest first. /proc/self/mounts escapes spaces as \040; our paths have none.
    while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done < <(awk -v d="$(readlink -f "$dir")" 'index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r)
}

remove_tree() {
    local dir=$1
    [ -e "$dir" ] || return 0
    umount_below "$dir"
    rm -rf --one-file-system -- "$dir"
}

cleanup() {
    local rc=$? p d
    set +e
    trap - EXIT INT TERM
    for p in "${bg_pgids[@]}"; do
        [ -n "$p" ] || continue
        kill -TERM -- "-$p" 2>/dev/null
        # mmdebstrap unmounts its chroot and removes its temp dir on TERM;
        # give it the time before we remove what it left.
        for _ in $(seq 1 150); do
            kill -0 -- "-$p" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL -- "-$p" 2>/dev/null
    done
    for d in "${tmp_dirs[@]}"; do
        remove_tree "$d"
    done
    if [ "$rc" -ne 0 ]; then
        say "failed (exit $rc)"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# make_tmp VAR PREFIX: a fresh directory under $CACHE/tmp (big disk, not /tmp).
make_tmp() {
    local -n ret=$1
    ret=$(mktemp -d "$arg_cache/tmp/$2.XXXXXX")
    tmp_dirs+=("$ret")
}

# Prints the text between "# >>> section NAME" and "# <<< section NAME" of this
# script, so a change to how a step is built changes that step's key.
section_text() {
    awk -v n="$1" '$0 == "# >>> section " n { on = 1 } on { print } $0 == "# <<< section " n { on = 0 }' "$SELF"
}

sha256_stdin() { sha256sum | cut -d' ' -f1; }

need_tools() {
    local t missing=()
    for t in "$@"; do
        command -v "$t" >/dev/null || missing+=("$t")
    done
    [ "${#missing[@]}" -eq 0 ] || die "missing tools: ${missing[*]} (run tools/install-deps.sh)"
}

# run_logged LOG LABEL ETA CMD...: runs CMD niced in its own process group with
# output to LOG, prints a progress line every 30 s, tails LOG on failure.
run_logged() {
    local log=$1 label=$2 eta=$3 pid start now last=0 rc=0 steps
    shift 3
    start=$SECONDS
    setsid nice -n 10 "$@" >>"$log" 2>&1 &
    pid=$!
    bg_pgids=("$pid") # one at a time
    while kill -0 "$pid" 2>/dev/null; do
        sleep 2
        now=$((SECONDS - start))
        if [ $((now - last)) -ge 30 ]; then
            last=$now
            steps=$(grep -c '^  [A-Z]' "$log" || true) # kbuild's "  CC foo.o" lines
            if [ "${steps:-0}" -gt 0 ]; then
                steps=" $steps build steps;"
            else
                steps=
            fi
            say "$label: still running (${now}s of about $eta;$steps log $log)"
        fi
    done
    wait "$pid" || rc=$?
    bg_pgids=()
    if [ "$rc" -ne 0 ]; then
        say "$label: failed after $((SECONDS - start))s; last lines of $log:"
        tail -n 40 "$log" >&2
        return "$rc"
    fi
}

# >>> section kernel
# The custom kernel: tinyconfig (ARCH=x86_64, else 64BIT=n) + our fragment +
# olddefconfig, then a check that olddefconfig kept every option the fragment
# sets, then `make vmlinux` (the uncompressed ELF is what PVH boots; we never
# need the bzImage).
kernel_key() {
    {
        echo "kernel-fragment"
        cat "$KCONFIG_FRAGMENT"
        echo "linux-source $(dpkg-query -W -f='${Version}' "$LINUX_SOURCE_PKG")"
        echo "cc $(gcc --version | head -n1)"
        section_text kernel
    } | sha256_stdin
}

kernel_check_config() {
    local config=$1 line name bad=0
    while IFS= read -r line; do
        case "$line" in
        CONFIG_*=* | "# CONFIG_"*" is not set") ;;
        *) continue ;;
        esac
        if ! grep -qxF -- "$line" "$config"; then
            name=$(grep -oE 'CONFIG_[A-Za-z0-9_]+' <<<"$line" | head -n1)
            say "kernel: fragment wants '$line', olddefconfig gave '$(grep -E "^(# )?$name[= ]" "$config" || echo unset)'"
            bad=1
        fi
    done <"$KCONFIG_FRAGMENT"
    return "$bad"
}

kernel_build_custom() {
    local key=$1 dest=$2 work log src out t0
    dpkg-query -W -f='${Status}' "$LINUX_SOURCE_PKG" 2>/dev/null | grep -q 'install ok installed' ||
        die "kernel: package $LINUX_SOURCE_PKG is not installed"
    make_tmp work kernel
    log="$arg_cache/kernel/build-$(short "$key").log"
    : >"$log"
    src="$work/linux-source-6.1"
    out="$work/out"
    t0=$SECONDS
    say "kernel: building $(short "$key") (about 3-4 min on 2 cores; log $log)"
    say "kernel: unpacking $LINUX_SOURCE_TAR"
    tar -xf "$LINUX_SOURCE_TAR" -C "$work"
    say "kernel: configuring (tinyconfig + $(basename "$KCONFIG_FRAGMENT") + olddefconfig)"
    {
        make -C "$src" O="$out" ARCH=x86_64 tinyconfig
        "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$KCONFIG_FRAGMENT"
        make -C "$src" O="$out" ARCH=x86_64 olddefconfig
    } >>"$log" 2>&1 || { tail -n 40 "$log" >&2; die "kernel: configuration failed"; }
    kernel_check_config "$out/.config" || die "kernel: olddefconfig dropped options of the fragment (fix their dependencies)"
    say "kernel: compiling with make -j$(nproc) vmlinux"
    run_logged "$log" "kernel: compile" "3-4 min" \
        make -C "$src" O="$out" ARCH=x86_64 KBUILD_BUILD_USER=space KBUILD_BUILD_HOST=template-build \
        -j"$(nproc)" vmlinux
    # PVH boot needs the Xen ELF note carrying XEN_ELFNOTE_PHYS32_ENTRY (type 0x12).
    readelf -n "$out/vmlinux" | grep -A3 '^ *Xen' | grep -qiE '0x00000012|PHYS32_ENTRY' ||
        die "kernel: $out/vmlinux has no PVH entry note"
    mkdir -p "$dest.tmp"
    cp "$out/vmlinux" "$dest.tmp/vmlinux"
    cp "$out/.config" "$dest.tmp/config"
    mv "$log" "$dest.tmp/build.log"
    mv -T "$dest.tmp" "$dest"
    say "kernel: built in $((SECONDS - t0))s ($(( $(stat -c %s "$dest/vmlinux") >> 20 )) MiB vmlinux)"
    remove_tree "$work"
}
# <<< section kernel

# >>> section kernel-debian
# Fallback: Debian's cloud kernel. Its bzImage is turned into a PVH-bootable
# ELF with extract-vmlinux; virtio drivers are modules loaded by a busybox
# initramfs, which also applies ip= (Debian has no CONFIG_IP_PNP), mounts
# root= and switch_roots into init=. Needs microvm acpi=on (the virtio-mmio
# transports are found through ACPI) and -initrd.
debian_kernel_pkg() {
    apt-cache depends linux-image-cloud-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}

kernel_key_debian() {
    local pkg=$1
    {
        echo "debian-kernel $pkg $(apt-cache show --no-all-versions "$pkg" | awk '/^Version:/ { print $2; exit }')"
        echo "busybox $(dpkg-query -W -f='${Version}' busybox-static)"
        echo "linux-source $(dpkg-query -W -f='${Version}' "$LINUX_SOURCE_PKG")"
        section_text kernel-debian
    } | sha256_stdin
}

# The initramfs /init. Parameters come from /proc/cmdline: root= (default
# /dev/vda), rootfstype= (ext4), init= (/sbin/init), ip= in the kernel's
# client:server:gw:netmask:hostname:dev:autoconf form.
debian_initramfs_init() {
    cat <<'INIT'
#!/bin/sh
export PATH=/bin
mount -t devtmpfs dev /dev
mount -t proc proc /proc
mount -t sysfs sys /sys
for m in virtio_ring virtio virtio_mmio virtio_blk failover net_failover virtio_net \
    vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport virtio_balloon \
    virtio_rng virtio_console; do
    [ -f /lib/modules/$m.ko ] && insmod /lib/modules/$m.ko 2>/dev/null
done
root=/dev/vda fstype=ext4 init=/sbin/init ip= rwmode=rw
for a in $(cat /proc/cmdline); do
    case "$a" in
    root=*) root=${a#root=} ;;
    rootfstype=*) fstype=${a#rootfstype=} ;;
    init=*) init=${a#init=} ;;
    ip=*) ip=${a#ip=} ;;
    ro) rwmode=ro ;;
    esac
done
if [ -n "$ip" ]; then
    IFS=: read -r client server gw mask host dev auto <<EOF
$ip
EOF
    dev=${dev:-eth0}
    i=0; while [ ! -e /sys/class/net/$dev ] && [ $i -lt 300 ]; do sleep 0.01; i=$((i+1)); done
    ip link set lo up
    ip link set "$dev" up
    if [ -n "$client" ]; then
        bits=0
        for o in $(echo "${mask:-255.255.255.255}" | tr . ' '); do
            case $o in 255) bits=$((bits+8));; 254) bits=$((bits+7));; 252) bits=$((bits+6));;
            248) bits=$((bits+5));; 240) bits=$((bits+4));; 224) bits=$((bits+3));;
            192) bits=$((bits+2));; 128) bits=$((bits+1));; esac
        done
        ip addr add "$client/$bits" dev "$dev"
        [ -n "$gw" ] && ip route add default via "$gw" dev "$dev"
    fi
    [ -n "$host" ] && echo "$host" > /proc/sys/kernel/hostname
fi
i=0; while [ ! -b "$root" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
mount -t "$fstype" -o "$rwmode" "$root" /newroot || { echo "initramfs: cannot mount $root"; exec sh; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot "$init"
INIT
}

kernel_build_debian() {
    local key=$1 dest=$2 pkg=$3 work mods kver d m
    make_tmp work kernel-debian
    say "kernel: building Debian cloud kernel $pkg $(short "$key")"
    (cd "$work" && apt-get download "$pkg" >/dev/null) || die "kernel: apt-get download $pkg failed"
    dpkg-deb -x "$work"/"$pkg"_*.deb "$work/pkg"
    kver=${pkg#linux-image-}
    tar -xf "$LINUX_SOURCE_TAR" -C "$work" linux-source-6.1/scripts/extract-vmlinux
    mkdir -p "$dest.tmp"
    sh "$work/linux-source-6.1/scripts/extract-vmlinux" "$work/pkg/boot/vmlinuz-$kver" >"$dest.tmp/vmlinux"
    d="$work/initramfs"
    mkdir -p "$d"/{bin,dev,proc,sys,newroot,lib/modules}
    cp /bin/busybox "$d/bin/busybox"
    for m in sh mount umount insmod ip sleep switch_root cat tr echo; do
        ln -s busybox "$d/bin/$m"
    done
    mods="$work/pkg/lib/modules/$kver/kernel"
    for m in drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_mmio \
        drivers/block/virtio_blk net/core/failover drivers/net/net_failover drivers/net/virtio_net \
        net/vmw_vsock/vsock net/vmw_vsock/vmw_vsock_virtio_transport_common \
        net/vmw_vsock/vmw_vsock_virtio_transport drivers/virtio/virtio_balloon \
        drivers/char/hw_random/virtio-rng drivers/char/virtio_console; do
        if [ -f "$mods/$m.ko" ]; then
            cp "$mods/$m.ko" "$d/lib/modules/$(basename "$m" | tr - _).ko"
        elif [ -f "$mods/$m.ko.xz" ]; then
            xz -dc "$mods/$m.ko.xz" >"$d/lib/modules/$(basename "$m" | tr - _).ko"
        fi # else built in
    done
    debian_initramfs_init >"$d/init"
    chmod 0755 "$d/init"
    # Uncompressed: about 0.1-0.2 s faster to boot under TCG than gzip -1.
    (cd "$d" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$dest.tmp/initrd.cpio"
    mv -T "$dest.tmp" "$dest"
    say "kernel: Debian kernel $kver ready"
    remove_tree "$work"
}
# <<< section kernel-debian

# >>> section rootfs
# Base root filesystem: mmdebstrap minbase + the recipe's packages, slimmed
# with dpkg path excludes (these stay in /etc/dpkg/dpkg.cfg.d/ so later
# apt-get installs in the sandbox stay slim too), then setup.sh in a chroot.
read_mirror() {
    local f uri=
    for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri=$(awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) if ($i ~ /debian/ && $i !~ /security/) { print $i; exit } }' "$f")
        [ -n "$uri" ] && break
    done
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { if ($i !~ /security/) print $i; break } }' \
            /etc/apt/sources.list | head -n1)
    fi
    printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}

# Security updates come from the host's debian-security URI when it has one.
read_security_mirror() {
    local mirror=$1 uri=
    uri=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
        grep -iE '^[[:space:]]*(uris:|deb[[:space:]])' |
        grep -oE '[a-z+]+://[^ ]*security[^ ]*' | head -n1 || true)
    if [ -z "$uri" ]; then
        case "$mirror" in
        http://deb.debian.org/debian | https://deb.debian.org/debian) uri="${mirror}-security" ;;
        esac
    fi
    printf '%s\n' "$uri"
}

apt_source_lines() {
    local mirror security
    mirror=$(read_mirror)
    [ -n "$arg_mirror" ] && mirror=$arg_mirror
    security=$(read_security_mirror "$mirror")
    echo "deb $mirror $arg_suite main"
    echo "deb $mirror $arg_suite-updates main"
    [ -n "$security" ] && echo "deb $security $arg_suite-security main"
    return 0
}

rootfs_packages() {
    sed -e 's/#.*//' -e 's/[[:space:]]//g' "$arg_recipe/packages" | grep -v '^$' | paste -sd, -
}

rootfs_key() {
    {
        echo "packages"
        cat "$arg_recipe/packages"
        echo "setup.sh"
        cat "$arg_recipe/setup.sh"
        echo "suite $arg_suite"
        apt_source_lines
        section_text rootfs
    } | sha256_stdin
}

rootfs_build() {
    local key=$1 dest=$2 work log t0 pkgs
    local -a sources=()
    make_tmp work rootfs
    log="$work/mmdebstrap.log"
    mapfile -t sources < <(apt_source_lines)
    pkgs=$(rootfs_packages)
    t0=$SECONDS
    say "rootfs: bootstrapping $arg_suite minbase + $(tr , '\n' <<<"$pkgs" | wc -l) packages from ${sources[0]#deb } (about 1 min)"
    # TMPDIR: mmdebstrap's chroot (and its /proc /sys /dev mounts) live in our
    # temp dir, so the cleanup trap finds them if we are interrupted.
    run_logged "$log" "rootfs: mmdebstrap" "1 min" env TMPDIR="$work" \
        mmdebstrap --mode=root --variant=minbase --format=tar \
        --include="$pkgs" \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-include=/usr/share/locale/locale.alias' \
        --dpkgopt='path-exclude=/usr/share/lintian/*' \
        --dpkgopt='path-exclude=/usr/share/linda/*' \
        --aptopt='APT::Install-Recommends "false"' \
        --aptopt='Acquire::Retries "3"' \
        --skip=cleanup/run \
        --customize-hook='find "$1/run" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf {} +' \
        --customize-hook="upload $arg_recipe/setup.sh /space-setup.sh" \
        --customize-hook='chroot "$1" /bin/sh -eu /space-setup.sh' \
        --customize-hook='rm -f "$1/space-setup.sh"' \
        --customize-hook='rm -rf "$1"/var/cache/apt/*.bin "$1"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old "$1"/var/log/apt/* "$1"/var/log/*.log' \
        --customize-hook='find "$1/usr/lib/locale" -mindepth 1 -maxdepth 1 ! -name C.utf8 -exec rm -rf {} +' \
        "$arg_suite" "$work/rootfs.tar" "${sources[@]}" || die "rootfs: mmdebstrap failed"
    mkdir -p "$dest.tmp"
    mv "$work/rootfs.tar" "$dest.tmp/rootfs.tar"
    mv "$log" "$dest.tmp/mmdebstrap.log"
    printf '%s\n' "${sources[@]}" >"$dest.tmp/sources.list"
    mv -T "$dest.tmp" "$dest"
    say "rootfs: built in $((SECONDS - t0))s ($(du -m "$dest/rootfs.tar" | cut -f1) MB tar)"
    remove_tree "$work"
}
# <<< section rootfs

# >>> section image
# Final image: base tree + agent, as an ext4 file system image.
#
# The image is sparse: `truncate` makes a 2 GiB hole and mkfs.ext4 -d writes
# only the used blocks (about 300 MB). We keep mkfs's default discard; on a
# regular file it only punches holes in what is already a hole, so it costs
# nothing. `-E nodiscard` matters only for a preallocated (dd) file that
# should stay fully allocated; we do not want that: a sparse template is
# cheaper to store and to copy where reflink is missing (cp keeps holes), and
# a reflink clone of it is O(extents) and allocates nothing until the guest
# writes. -m 0: sandboxes run as "user", and 5 % root-reserved blocks would
# only hide 100 MB of the disk from it.
readonly IMAGE_SIZE=2G

image_key() {
    local rootfs_key=$1
    {
        echo "rootfs $rootfs_key"
        echo "agent $(sha256sum <"$arg_agent" | cut -d' ' -f1)"
        echo "size $IMAGE_SIZE"
        section_text image
    } | sha256_stdin
}

# A dynamically linked agent must find its libraries in the image, or PID 1
# dies before printing anything. Fail the build instead.
image_check_agent_libs() {
    local tree=$1 lib d found missing=()
    file_is_elf "$arg_agent" || return 0
    while read -r lib; do
        found=0
        for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib usr/lib usr/local/lib lib64; do
            if [ -e "$tree/$d/$lib" ] || [ -L "$tree/$d/$lib" ]; then
                found=1
                break
            fi
        done
        [ "$found" = 1 ] || missing+=("$lib")
    done < <(readelf -d "$arg_agent" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    [ "${#missing[@]}" -eq 0 ] ||
        die "image: the agent needs ${missing[*]}, not in the image (add the package to $arg_recipe/packages)"
}

file_is_elf() { [ "$(head -c4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

image_build() {
    local key=$1 dest=$2 tar=$3 work t0
    make_tmp work image
    t0=$SECONDS
    say "image: building $(short "$key") (unpack, agent, mkfs.ext4 -d; about 5 s)"
    mkdir "$work/tree"
    tar -xf "$tar" -C "$work/tree" --numeric-owner --same-permissions --xattrs --xattrs-include='*'
    image_check_agent_libs "$work/tree"
    install -D -m 0755 -o 0 -g 0 "$arg_agent" "$work/tree/usr/local/sbin/space-agent"
    mkdir -p "$work/tree/run/e2b"
    mkdir -p "$dest.tmp"
    truncate -s "$IMAGE_SIZE" "$dest.tmp/rootfs.ext4"
    mkfs.ext4 -q -F -L root -m 0 -d "$work/tree" "$dest.tmp/rootfs.ext4" ||
        die "image: mkfs.ext4 failed"
    mv -T "$dest.tmp" "$dest"
    say "image: built in $((SECONDS - t0))s ($(du -m "$dest/rootfs.ext4" | cut -f1) MB allocated of $IMAGE_SIZE)"
    remove_tree "$work"
}
# <<< section image

# >>> section publish
# The template directory is assembled next to --out and renamed into place,
# so readers see either the old template or the new one, never a half-built
# one. Replacing an existing template takes two renames (old away, new in);
# between them, for a few microseconds, --out does not exist.
json_str() { printf '"%s"' "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<<"$1")"; }

json_field() {
    sed -n "s/^ *\"$2\": *\"\\([^\"]*\\)\".*/\\1/p" "$1" 2>/dev/null | head -n1
}

json_int_field() {
    sed -n "s/^ *\"$2\": *\\([0-9][0-9]*\\).*/\\1/p" "$1" 2>/dev/null | head -n1
}

# Images are keyed by the agent binary too, so every agent change leaves one
# (about 300 MB) behind: keep the most recently used few. Published templates
# are copies, so removing a cache entry never breaks one.
prune_images() {
    local keep=$1 n=0 d
    while IFS= read -r d; do
        n=$((n + 1))
        if [ "$n" -gt 4 ] && [ "$d" != "$keep" ]; then
            rm -rf -- "$d"
        fi
    done < <(ls -1dt "$arg_cache"/image/*/ 2>/dev/null | sed 's:/$::' | grep -v '\.tmp$')
}

publish() {
    local name=$1 kernel_dir=$2 kernel_key=$3 image_dir=$4 image_key=$5 flavour=$6
    local out=$arg_out parent new old='' initrd_line=
    if [ -f "$out/template.json" ] &&
        [ "$(json_field "$out/template.json" kernel_key)" = "$kernel_key" ] &&
        [ "$(json_field "$out/template.json" image_key)" = "$image_key" ] &&
        [ "$(json_field "$out/template.json" name)" = "$name" ] &&
        [ "$(json_int_field "$out/template.json" vcpus)" = "$size_vcpus" ] &&
        [ "$(json_int_field "$out/template.json" memory_mb)" = "$size_memory_mb" ] &&
        [ -f "$out/vmlinux" ] && [ -f "$out/rootfs.ext4" ]; then
        say "publish: $out is up to date"
        return 0
    fi
    parent=$(dirname "$out")
    mkdir -p "$parent"
    new=$(mktemp -d "$parent/.$(basename "$out").new.XXXXXX")
    tmp_dirs+=("$new")
    cp --reflink=auto "$kernel_dir/vmlinux" "$new/vmlinux"
    if [ -f "$kernel_dir/initrd.cpio" ]; then
        cp --reflink=auto "$kernel_dir/initrd.cpio" "$new/initrd.cpio"
        initrd_line="  \"initrd\": \"initrd.cpio\","
    fi
    cp --reflink=auto --sparse=always "$image_dir/rootfs.ext4" "$new/rootfs.ext4"
    {
        echo "{"
        echo "  \"name\": $(json_str "$name"),"
        echo "  \"kernel\": \"vmlinux\","
        [ -n "$initrd_line" ] && echo "$initrd_line"
        echo "  \"rootfs\": \"rootfs.ext4\","
        echo "  \"kernel_flavour\": \"$flavour\","
        echo "  \"kernel_key\": \"$kernel_key\","
        echo "  \"image_key\": \"$image_key\","
        echo "  \"vcpus\": $size_vcpus,"
        echo "  \"memory_mb\": $size_memory_mb,"
        echo "  \"built_at\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\""
        echo "}"
    } >"$new/template.json"
    chmod 0755 "$new"
    sync -f "$new/rootfs.ext4"
    if [ -e "$out" ]; then
        old=$(mktemp -u "$parent/.$(basename "$out").old.XXXXXX")
        mv -T "$out" "$old"
        tmp_dirs+=("$old")
    fi
    mv -T "$new" "$out"
    [ -z "$old" ] || remove_tree "$old"
    say "publish: $out ready"
}
# <<< section publish

# Reads $arg_recipe/size (the header) into size_vcpus and size_memory_mb; dies on
# anything else in it, so a typo never builds a template of the wrong size.
size_vcpus=1
size_memory_mb=512
read_size() {
    local f="$arg_recipe/size" line key val n=0 seen=
    [ -f "$f" ] || return 0
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        line=${line%%#*}
        line=${line//[[:space:]]/}
        [ -n "$line" ] || continue
        [[ "$line" == *=* ]] || die "$f:$n: expected key=value, got '$line'"
        key=${line%%=*}
        val=${line#*=}
        [[ "$val" =~ ^[1-9][0-9]{0,5}$ ]] || die "$f:$n: '$key' must be a positive integer, got '$val'"
        case " $seen " in *" $key "*) die "$f:$n: '$key' given twice" ;; esac
        seen="$seen $key"
        case "$key" in
        vcpus)
            [ "$val" -le 16 ] || die "$f:$n: vcpus must be 1..16, got $val"
            size_vcpus=$val ;;
        memory_mb)
            [ "$val" -ge 128 ] && [ "$val" -le 65536 ] ||
                die "$f:$n: memory_mb must be 128..65536, got $val"
            size_memory_mb=$val ;;
        *) die "$f:$n: unknown key '$key' (vcpus, memory_mb)" ;;
        esac
    done <"$f"
}

main() {
    while [ $# -gt 0 ]; do
        case "$1" in
        --recipe) arg_recipe=${2:?}; shift 2 ;;
        --agent) arg_agent=${2:?}; shift 2 ;;
        --cache) arg_cache=${2:?}; shift 2 ;;
        --out) arg_out=${2:?}; shift 2 ;;
        --name) arg_name=${2:?}; shift 2 ;;
        --kernel) arg_kernel=${2:?}; shift 2 ;;
        --suite) arg_suite=${2:?}; shift 2 ;;
        --mirror) arg_mirror=${2:?}; shift 2 ;;
        --kernel-only) arg_kernel_only=1; shift ;;
        -h | --help) usage 0 ;;
        *) echo "template: unknown argument '$1'" >&2; usage ;;
        esac
    done
    [ -n "$arg_cache" ] || usage
    case "$arg_kernel" in custom | debian) ;; *) die "--kernel must be 'custom' or 'debian'" ;; esac
    if [ "$arg_kernel_only" = 0 ]; then
        [ -n "$arg_recipe" ] && [ -n "$arg_agent" ] && [ -n "$arg_out" ] || usage
        [ -f "$arg_recipe/packages" ] || die "recipe '$arg_recipe' has no packages file"
        [ -f "$arg_recipe/setup.sh" ] || die "recipe '$arg_recipe' has no setup.sh"
        [ -f "$arg_agent" ] || die "agent '$arg_agent' does not exist"
        arg_recipe=$(readlink -f "$arg_recipe")
        arg_agent=$(readlink -f "$arg_agent")
        arg_out=$(readlink -m "$arg_out")
        arg_name=${arg_name:-$(basename "$arg_recipe")}
        read_size
        say "size: $size_vcpus vCPU(s), $size_memory_mb MiB"
    fi
    [ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap, chroot, file ownership in the image)"

    mkdir -p "$arg_cache"
    arg_cache=$(readlink -f "$arg_cache")
    mkdir -p "$arg_cache"/{kernel,rootfs-base,image,tmp}

    # One build at a time per cache; whatever of ours is left in tmp/ after
    # we hold the lock is from a killed run.
    exec 9>"$arg_cache/.lock"
    if ! flock -n 9; then
        say "waiting for another template build using $arg_cache"
        flock 9
    fi
    local d
    for d in "$arg_cache"/tmp/{kernel,kernel-debian,rootfs,image}.* "$arg_cache"/{kernel,rootfs-base,image}/*.tmp; do
        [ -e "$d" ] && remove_tree "$d"
    done

    local t_start=$SECONDS kkey kdir flavour=$arg_kernel
    if [ "$arg_kernel" = custom ]; then
        need_tools gcc make flex bison bc readelf
        kkey=$(kernel_key)
        kdir="$arg_cache/kernel/$kkey"
        if [ -f "$kdir/vmlinux" ]; then
            say "kernel: cached (key $(short "$kkey"))"
        else
            kernel_build_custom "$kkey" "$kdir"
        fi
    else
        local pkg
        need_tools apt-get dpkg-deb cpio busybox xz
        pkg=$(debian_kernel_pkg)
        [ -n "$pkg" ] || die "kernel: cannot resolve linux-image-cloud-amd64 (apt-get update?)"
        kkey=$(kernel_key_debian "$pkg")
        kdir="$arg_cache/kernel/$kkey"
        if [ -f "$kdir/vmlinux" ]; then
            say "kernel: cached Debian $pkg (key $(short "$kkey"))"
        else
            kernel_build_debian "$kkey" "$kdir" "$pkg"
        fi
    fi
    if [ "$arg_kernel_only" = 1 ]; then
        printf '%s\n' "$kdir/vmlinux"
        return 0
    fi

    local rkey rdir ikey idir
    need_tools mmdebstrap mkfs.ext4 tar readelf
    rkey=$(rootfs_key)
    rdir="$arg_cache/rootfs-base/$rkey"
    if [ -f "$rdir/rootfs.tar" ]; then
        say "rootfs: cached (key $(short "$rkey"))"
    else
        rootfs_build "$rkey" "$rdir"
    fi

    ikey=$(image_key "$rkey")
    idir="$arg_cache/image/$ikey"
    if [ -f "$idir/rootfs.ext4" ]; then
        say "image: cached (key $(short "$ikey"))"
        touch "$idir"
    else
        image_build "$ikey" "$idir" "$rdir/rootfs.tar"
    fi
    prune_images "$idir"

    publish "$arg_name" "$kdir" "$kkey" "$idir" "$ikey" "$flavour"
    say "done in $((SECONDS - t_start))s"
    printf '%s\n' "$arg_out"
}

main "$@"
