#pragma once
/*
 * Why a VMM ended on its own (issue 13 item 4): the node finds a running or paused
 * instance whose VMM process is gone, gathers the evidence before it frees anything
 * (the wait status when the VMM is its child, the cgroup's OOM-kill counter, the tail
 * of the serial console) and classifies it into one reason, which the sandbox is
 * marked failed with:
 *
 *   oom          the cgroup's oom_kill counter rose (v2 memory.events, v1
 *                memory.oom_control): the kernel killed the VMM for its memory limit;
 *   panic        the console shows "Kernel panic": the guest kernel panicked, and with
 *                panic=-1 reboot=k and QEMU's -no-reboot its reboot is QEMU's exit;
 *   vmm_crashed  killed by a signal, a non-zero exit, or an end nobody can explain
 *                (the status is unknown after a node restart: not our child);
 *   shutdown     QEMU exited 0 with no panic (the guest rebooted: -no-reboot makes that
 *                QEMU's exit), or the console ends with the guest kernel's "reboot:
 *                System halted" / "reboot: Power down": the guest halted or powered
 *                off, which on microvm with acpi=off leaves QEMU alive with every vCPU
 *                stopped for ever, so the node looks for it while the VMM lives and
 *                kills the VMM itself.
 *
 * The order is the evidence's strength: an OOM kill is SIGKILL (it would read as a
 * crash), a panic is a clean QEMU exit (it would read as a shutdown). Everything here
 * is pure: console text is guest output (hostile) and is only searched, bounded.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum death_reason {
    DEATH_SHUTDOWN,
    DEATH_PANIC,
    DEATH_OOM,
    DEATH_VMM_CRASHED,
};

const char *death_reason_to_string(enum death_reason r);
/* The reason named s (death_reason_to_string()'s words), or -EINVAL. */
int death_reason_from_string(const char *s);

struct death_evidence {
    bool status_known; /* wait_status is the VMM's, from waitpid() */
    int wait_status;
    bool oom_known; /* oom_kills was read from the VMM's cgroup */
    uint64_t oom_kills;
    const char *console; /* tail of the serial console (NULL: none) */
    size_t console_len;
};

/* The message of a death is at most this long (with its NUL). */
#define DEATH_MESSAGE_MAX 256

/*
 * The "oom_kill N" counter from the text of a v2 memory.events or a v1
 * memory.oom_control ("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"). 0 or -EINVAL
 * (the line is missing or malformed: a v1 kernel before 4.13 has none).
 */
int death_parse_oom_kills(const char *text, uint64_t *ret);

/*
 * The oom_kill counter of the cgroup `name` (cgroup.h), read from whichever of the two
 * files the detected layout has. -EOPNOTSUPP without cgroups, -ENOENT when it is gone.
 */
int death_read_oom_kills(const char *name, uint64_t *ret);

/*
 * Finds the first "Kernel panic" line in console[0..len) and copies it into msg
 * (printable ASCII only, truncated to n-1); true when there was one.
 */
bool death_console_panic(const char *console, size_t len, char *msg, size_t n);

/*
 * True when the last line of console[0..len) (trailing CR/LF ignored, any printk time
 * prefix allowed) is the guest kernel's "reboot: System halted" or "reboot: Power
 * down". Guest root can print it itself: that only ends its own sandbox, as a real
 * halt would.
 */
bool death_console_halted(const char *console, size_t len);

/* Classifies e (see above); msg gets a one-line explanation (n >= 1). */
enum death_reason death_classify(const struct death_evidence *e, char *msg, size_t n);
