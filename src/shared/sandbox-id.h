#pragma once
/*
 * The one validator for sandbox ids (style.md R18). Ids reach paths, netns
 * names, DNS labels and (later) nft sets, so they are exactly what E2B uses:
 * lowercase [a-z0-9], SANDBOX_ID_LEN characters.
 */
#include <stdbool.h>

#define SANDBOX_ID_LEN 20

bool sandbox_id_is_valid(const char *id);
/* Writes a fresh random id (SANDBOX_ID_LEN + 1 bytes). */
int sandbox_id_new(char out[SANDBOX_ID_LEN + 1]);

/* Template names: [a-z0-9][a-z0-9_-]{0,62}; they reach paths too. */
bool template_name_is_valid(const char *name);
