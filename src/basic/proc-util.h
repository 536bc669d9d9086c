#pragma once
/* Processes found through /proc. */
#include <sys/types.h>

/*
 * Sends sig to every process whose real, effective or saved uid is uid
 * (kill(2) by owner, which kill itself cannot do). *ret_n (may be NULL)
 * gets how many were signalled. Processes that exit while we scan are
 * skipped. Returns 0 or -errno (/proc unreadable). Never pass uid 0: the
 * function refuses it (-EINVAL), so a slot uid that went wrong cannot turn
 * into "kill every root process".
 */
int proc_kill_uid(uid_t uid, int sig, unsigned *ret_n);
