#pragma once
/*
 * envd's /files endpoint (e2b-compat.md §6.6): GET downloads a file (gzip
 * when accepted, Range and If-Modified-Since otherwise), POST uploads one
 * or more files (multipart/form-data or application/octet-stream, either
 * optionally gzip-encoded). Access is by X-Access-Token or a signed URL
 * (§5.1).
 */
struct agent;
struct evhttp_request;
struct evkeyvalq;

void files_http_handle(struct agent *a, struct evhttp_request *req);

/* POST /files/compose: concatenate source files into a destination, then delete them. */
void files_http_compose(struct agent *a, struct evhttp_request *req);

/*
 * "v1_" + unpadded base64 of sha256("<path>:<op>:<user>:<token>[:<expiration>]"),
 * the /files URL signature. Writes a NUL-terminated string into out (64 bytes).
 */
void files_signature(const char *path, const char *op, const char *user, const char *token,
                     const char *expiration, char out[64]);

/*
 * envd's validateSigning() for /files: the X-Access-Token header value
 * (hdr, may be NULL), else a signature over the raw query values q for op
 * ("read" or "write"). Returns 0, or -EACCES with the reason in *ret_msg.
 */
int files_check_access(struct agent *a, const char *hdr, const struct evkeyvalq *q, const char *op,
                       const char **ret_msg);
