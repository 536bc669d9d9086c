#!/bin/bash
# template-boot-test.sh: build a template with a stand-in agent and boot it
# exactly as space-node does (docs/templates.md, "Guest boot contract").
#
# Usage: tools/template-boot-test.sh --cache DIR [--recipe templates/base]
#                                    [--kernel custom|debian] [--keep DIR] [--console FILE]
#
# --keep DIR keeps the built test template in DIR; --console FILE keeps the
# guest's serial log.
#
# The stand-in init (a shell script, not the real agent) mounts /proc,
# prints SPACE_TEST_* markers, runs a few checks of the kernel features the
# agent needs and starts `python3 -m http.server 49983` on the guest address.
# The host side is a network namespace of our own holding tap0
# (169.254.0.1/30); the test fetches the guest's HTTP server through it.
# Everything it creates (netns, tap, qemu, temp dirs) is removed on exit.
# Needs root, qemu-system-x86, iproute2, curl.

set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SELF")")
readonly SELF REPO

arg_cache=
arg_recipe="$REPO/templates/base"
arg_kernel=custom
arg_keep=
arg_console=
while [ $# -gt 0 ]; do
    case "$1" in
    --cache) arg_cache=${2:?}; shift 2 ;;
    --recipe) arg_recipe=${2:?}; shift 2 ;;
    --kernel) arg_kernel=${2:?}; shift 2 ;;
    --keep) arg_keep=${2:?}; shift 2 ;;
    --console) arg_console=${2:?}; shift 2 ;;
    *) sed -n '5,6p' "$SELF" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
[ -n "$arg_cache" ] || { echo "boot-test: --cache is required" >&2; exit 2; }

say() { printf 'boot-test: %s\n' "$*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

readonly NS="spacetest-$$"
readonly GUEST_IP=169.254.0.2
readonly HOST_IP=169.254.0.1
readonly GUEST_MAC=02:00:00:00:00:02
work=
qemu_pid=

cleanup() {
    local rc=$?
    if [ -n "$qemu_pid" ]; then
        kill "$qemu_pid" 2>/dev/null || true
        wait "$qemu_pid" 2>/dev/null || true
    fi
    ip netns del "$NS" 2>/dev/null || true
    if [ -n "$arg_console" ] && [ -f "$work/console.log" ]; then
        cp "$work/console.log" "$arg_console" || true
    fi
    [ -z "$work" ] || rm -rf --one-file-system -- "$work"
    [ "$rc" -eq 0 ] || say "FAILED (exit $rc)"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$arg_cache/tmp"
work=$(mktemp -d "$(readlink -f "$arg_cache")/tmp/boot-test.XXXXXX")

# --- stand-in agent ---------------------------------------------------------
cat >"$work/stand-in-init" <<'INIT'
#!/bin/sh
# Stand-in for space-agent, used only by tools/template-boot-test.sh.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs -o mode=1777 tmp /tmp
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
echo SPACE_TEST_INIT_OK
echo "SPACE_TEST_UNAME $(uname -r)"
echo "SPACE_TEST_PY $(python3 -c 'print(1+1)')"
echo "SPACE_TEST_NET $(ip -4 -o addr show dev eth0 | awk '{print $4}') via $(ip route show default | awk '{print $3}') host $(hostname)"
echo "SPACE_TEST_USER $(id user) $(stat -c '%U:%G %a' /home/user) shell $(getent passwd user | cut -d: -f7)"
echo "SPACE_TEST_SUDO $(runuser -u user -- sudo -n id -u 2>&1)"
echo "SPACE_TEST_RUN_E2B $(stat -c '%a' /run/e2b 2>&1)"
echo "SPACE_TEST_AGENT $(stat -c '%a %U' /usr/local/sbin/space-agent)"
echo "SPACE_TEST_TOOLS $(git --version) | $(curl --version | head -n1 | cut -d' ' -f1-2) | $(bash --version | head -n1)"
python3 - <<'PY'
import ctypes, os, pty, select, signal, socket, subprocess, tempfile, time
libc = ctypes.CDLL(None, use_errno=True)
ok = []
fd = libc.inotify_init1(os.O_CLOEXEC)
assert fd >= 0, "inotify"
d = tempfile.mkdtemp()
assert libc.inotify_add_watch(fd, d.encode(), 0x100) >= 0  # IN_CREATE
open(os.path.join(d, "x"), "w").close()
assert select.select([fd], [], [], 2)[0], "inotify event"
ok.append("inotify")
e = select.epoll(); e.close(); ok.append("epoll")
os.close(os.eventfd(0)); ok.append("eventfd")
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1]); ok.append("sigmask")
os.close(os.memfd_create("t")); ok.append("memfd")
pid, master = pty.fork()
if pid == 0:
    os.execv("/bin/bash", ["bash", "-c", "echo PTY_OK"])
out = b""
while b"PTY_OK" not in out:
    try:
        out += os.read(master, 100)
    except OSError:
        break
os.waitpid(pid, 0)
assert b"PTY_OK" in out, "pty"
ok.append("pty")
import multiprocessing
with multiprocessing.Pool(2) as p:  # needs /dev/shm, sem_open
    assert p.map(abs, [-1, -2]) == [1, 2]
ok.append("multiprocessing")
s = socket.socket(socket.AF_UNIX); s.close(); ok.append("unix")
import fcntl
with open("/tmp/lock", "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX); ok.append("flock")
os.makedirs("/sys/fs/cgroup", exist_ok=True)
subprocess.run(["mount", "-t", "cgroup2", "none", "/sys/fs/cgroup"], check=True)
ok.append("cgroup2:" + open("/sys/fs/cgroup/cgroup.controllers").read().strip().replace(" ", ","))
print("SPACE_TEST_FEATURES " + " ".join(ok), flush=True)
PY
cd /tmp && python3 -m http.server 49983 --bind 169.254.0.2 >/dev/null 2>&1 &
echo SPACE_TEST_HTTP_STARTED
while :; do sleep 3600; done
INIT
chmod 0755 "$work/stand-in-init"

# --- build -------------------------------------------------------------------
tdir="$work/template"
[ -n "$arg_keep" ] && tdir=$arg_keep
t0=$(now)
"$REPO/tools/template-build.sh" --recipe "$arg_recipe" --agent "$work/stand-in-init" \
    --cache "$arg_cache" --out "$tdir" --kernel "$arg_kernel" --name boot-test >/dev/null
say "template ready in $(elapsed "$t0")s"

# --- host side: netns + tap --------------------------------------------------
ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" tuntap add tap0 mode tap
ip -n "$NS" link set tap0 address 02:00:00:00:00:01
ip -n "$NS" addr add "$HOST_IP/30" dev tap0
ip -n "$NS" link set tap0 up
ip -n "$NS" neigh replace "$GUEST_IP" lladdr "$GUEST_MAC" dev tap0 nud permanent

# --- boot, exactly as the node does ------------------------------------------
khz=$(dmesg 2>/dev/null | sed -n 's/.*tsc: Detected \([0-9]*\)\.\([0-9]\{3\}\) MHz.*/\1\2/p' | head -n1)
[ -n "$khz" ] || khz=$(awk -F: '/^cpu MHz/ { printf "%d", $2 * 1000; exit }' /proc/cpuinfo)
cp --reflink=auto --sparse=always "$tdir/rootfs.ext4" "$work/clone.ext4"
machine="microvm,x-option-roms=off,rtc=on,isa-serial=on,acpi=off"
initrd=()
if [ -f "$tdir/initrd.cpio" ]; then
    machine="microvm,x-option-roms=off,rtc=on,isa-serial=on" # Debian kernel: virtio-mmio via ACPI
    initrd=(-initrd "$tdir/initrd.cpio")
fi
console="$work/console.log"
t0=$(now)
ip netns exec "$NS" qemu-system-x86_64 -M "$machine" -accel tcg -cpu qemu64 -m 512 -smp 1 \
    -nodefaults -no-user-config -display none -serial "file:$console" \
    -kernel "$tdir/vmlinux" "${initrd[@]}" \
    -append "console=ttyS0 reboot=k panic=-1 tsc_early_khz=$khz tsc=reliable root=/dev/vda rw rootfstype=ext4 init=/usr/local/sbin/space-agent ip=$GUEST_IP::$HOST_IP:255.255.255.252:sandbox:eth0:off" \
    -drive "id=root,file=$work/clone.ext4,format=raw,if=none,cache=unsafe" -device virtio-blk-device,drive=root \
    -netdev tap,id=n0,ifname=tap0,script=no,downscript=no -device "virtio-net-device,netdev=n0,mac=$GUEST_MAC" \
    -no-reboot &
qemu_pid=$!

wait_for() { # wait_for PATTERN SECONDS
    local deadline
    deadline=$(awk -v t="$(now)" -v s="$2" 'BEGIN { printf "%.3f", t + s }')
    until grep -q "$1" "$console" 2>/dev/null; do
        kill -0 "$qemu_pid" 2>/dev/null || { say "qemu exited"; return 1; }
        awk -v t="$(now)" -v d="$deadline" 'BEGIN { exit !(t > d) }' && return 1
        sleep 0.02
    done
}
fail() { say "$*; console log:"; tail -n 60 "$console" >&2; exit 1; }

wait_for SPACE_TEST_INIT_OK 60 || fail "init not reached"
t_init=$(elapsed "$t0")
wait_for SPACE_TEST_HTTP_STARTED 120 || fail "stand-in did not finish its checks"
t_checks=$(elapsed "$t0")
body=
for _ in $(seq 1 300); do
    if body=$(ip netns exec "$NS" curl -sf --connect-timeout 0.2 --max-time 2 "http://$GUEST_IP:49983/"); then
        break
    fi
    sleep 0.05
done
t_http=$(elapsed "$t0")
grep -a '^SPACE_TEST_' "$console" | sed 's/^/  /' >&2
grep -q 'Directory listing' <<<"$body" || fail "no HTTP answer from the guest"
grep -q '^SPACE_TEST_PY 2' "$console" || fail "python3 in the guest"
grep -q '^SPACE_TEST_FEATURES .*cgroup2' "$console" || fail "feature checks in the guest"
grep -q '^SPACE_TEST_SUDO 0' "$console" || fail "sudo for user"
say "OK: init ${t_init}s, checks done ${t_checks}s, HTTP from the host ${t_http}s after qemu start"
