#pragma once
/*
 * Re-identification (architecture.md "Fast create"): the /init fields that
 * make a guest restored from a shared template snapshot this sandbox and no
 * other. Every clone of one snapshot starts with the same hostname,
 * machine-id and kernel CRNG state; the host sends each its own.
 *
 *   hostname   [A-Za-z0-9-]{1,63}
 *   machineId  32 lowercase hex (machine-id(5))
 *   entropy    base64 of 32..512 random bytes: credited to the kernel pool
 *              (RNDADDENTROPY) and the CRNG reseeded from it (RNDRESEEDCRNG),
 *              so two clones never produce the same random bytes
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IDENTITY_ENTROPY_MIN 32
#define IDENTITY_ENTROPY_MAX 512

struct identity {
    const char *hostname;   /* borrowed from the message, or NULL */
    const char *machine_id; /* borrowed, or NULL */
    uint8_t entropy[IDENTITY_ENTROPY_MAX];
    size_t entropy_len; /* 0: none */
};

/* Checks msg's fields (absent ones stay unset); -EINVAL with *why for a bad one. */
int identity_parse(json_t *msg, struct identity *ret, const char **why);
/* Applies what is set; only the guest's init may (it changes the machine). Failures are
 * logged: an entropy failure returns -errno, the rest are best effort. */
int identity_apply(const struct identity *id);
/* Wipes the entropy. */
void identity_release(struct identity *id);
