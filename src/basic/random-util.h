#pragma once
/* Random bytes from getrandom(2), and the id alphabet E2B clients expect. */
#include <stddef.h>

int random_bytes(void *buf, size_t n);
/* Writes n random chars from [a-z0-9] plus a NUL into out (n + 1 bytes). */
int random_id(char *out, size_t n);
/* Writes 2n lowercase hex chars plus a NUL. */
int random_hex(char *out, size_t nbytes);
