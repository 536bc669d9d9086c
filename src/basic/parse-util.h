#pragma once
/*
 * The only number parsers (style.md R19: never strtol/atoi directly).
 * Each rejects empty strings, signs where unsigned, trailing garbage and
 * overflow with -EINVAL or -ERANGE, and writes *ret only on success.
 */
#include <stdint.h>

int parse_u64(const char *s, uint64_t *ret);
int parse_u32(const char *s, uint32_t *ret);
int parse_i64(const char *s, int64_t *ret);
/* "512", "512K", "256M", "2G" (binary units) to bytes. */
int parse_size(const char *s, uint64_t *ret);
