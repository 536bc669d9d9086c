#pragma once
/*
 * Plain HTTP replies (not Connect): JSON bodies and the envd error shape
 * {"code": <http status>, "message": "..."} that the SDKs read (§6.6, §7).
 */
#include <jansson.h>

#include "basic/macro.h"

struct evhttp_request;

/* Sends status with body (stolen; NULL sends a 500 error instead). */
void reply_json(struct evhttp_request *req, int status, json_t *body);
/* Sends status with {"code":status,"message":...}. */
void reply_error(struct evhttp_request *req, int status, const char *fmt, ...) _printf_(3, 4);
/* Sends status with an empty body. */
void reply_empty(struct evhttp_request *req, int status);
/* Reason phrase for status ("OK", "Not Found", ...). */
const char *reply_reason(int status);
