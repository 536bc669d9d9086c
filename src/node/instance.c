/* Instance ids, the instance record and the re-attach decision; see instance.h. */
#include "node/instance.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/random-util.h"

bool instance_id_is_valid(const char *iid)
{
    if (!iid || strlen(iid) != INSTANCE_ID_LEN) {
        return false;
    }
    for (const char *p = iid; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))) {
            return false;
        }
    }
    return true;
}

int instance_id_new(char out[INSTANCE_ID_LEN + 1])
{
    return random_id(out, INSTANCE_ID_LEN);
}

char *instance_record_to_json(const struct instance_record *rec, const char *dir, const char *netns)
{
    json_t *j = json_pack(
        "{s:i, s:s, s:s?, s:s, s:i, s:i, s:I, s:s, s:s, s:I, s:I, s:s, s:s}", "version", 1, "iid",
        rec->iid, "sandbox_id", rec->sandbox_id[0] ? rec->sandbox_id : NULL, "template",
        rec->template_name, "vcpus", (int)rec->vcpus, "memory_mib", (int)rec->memory_mib,
        "created_at", (json_int_t)rec->created_at, "state", vm_state_to_string(rec->state),
        "access_token", rec->access_token, "pid", (json_int_t)rec->pid, "pid_start_time",
        (json_int_t)rec->pid_start_time, "dir", dir, "netns", netns);
    if (j && rec->ca_given[0] &&
        json_object_set_new(j, "ca_given", json_string(rec->ca_given)) < 0) {
        json_decref(j);
        return NULL;
    }
    if (j && ((rec->net_bps > 0 &&
               json_object_set_new(j, "net_bps", json_integer((json_int_t)rec->net_bps)) < 0) ||
              (rec->disk_bps > 0 &&
               json_object_set_new(j, "disk_bps", json_integer((json_int_t)rec->disk_bps)) < 0) ||
              (rec->disk_iops > 0 &&
               json_object_set_new(j, "disk_iops", json_integer(rec->disk_iops)) < 0))) {
        json_decref(j);
        return NULL;
    }
    if (j && rec->network) {
        json_error_t jerr;
        json_t *net = json_loads(rec->network, 0, &jerr);
        if (!json_is_object(net) || json_object_set_new(j, "network", net) < 0) {
            json_decref(j); /* a policy we cannot write back must not be lost silently */
            return NULL;
        }
    }
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return text;
}

static void copy_string(char *dst, size_t n, json_t *v)
{
    const char *s = json_string_value(v);
    if (s && strlen(s) < n) {
        memcpy(dst, s, strlen(s) + 1);
    }
}

int instance_record_from_json(const char *text, struct instance_record *ret)
{
    struct instance_record rec = { .state = VM_CREATING };
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);

    if (!json_is_object(j)) {
        json_decref(j);
        return -EINVAL;
    }
    copy_string(rec.iid, sizeof(rec.iid), json_object_get(j, "iid"));
    copy_string(rec.sandbox_id, sizeof(rec.sandbox_id), json_object_get(j, "sandbox_id"));
    copy_string(rec.template_name, sizeof(rec.template_name), json_object_get(j, "template"));
    copy_string(rec.access_token, sizeof(rec.access_token), json_object_get(j, "access_token"));
    copy_string(rec.ca_given, sizeof(rec.ca_given), json_object_get(j, "ca_given"));
    if (!instance_id_is_valid(rec.iid) ||
        (rec.sandbox_id[0] && !sandbox_id_is_valid(rec.sandbox_id)) ||
        (rec.template_name[0] && !template_name_is_valid(rec.template_name))) {
        json_decref(j);
        return -EINVAL;
    }
    rec.vcpus = (unsigned)json_integer_value(json_object_get(j, "vcpus"));
    rec.memory_mib = (unsigned)json_integer_value(json_object_get(j, "memory_mib"));
    rec.created_at = (usec_t)json_integer_value(json_object_get(j, "created_at"));
    json_int_t pid = json_integer_value(json_object_get(j, "pid"));
    rec.pid = pid > 1 && pid <= INT32_MAX ? (pid_t)pid : 0;
    rec.pid_start_time = (uint64_t)json_integer_value(json_object_get(j, "pid_start_time"));
    json_int_t bps = json_integer_value(json_object_get(j, "net_bps"));
    rec.net_bps = bps > 0 ? (uint64_t)bps : 0;
    bps = json_integer_value(json_object_get(j, "disk_bps"));
    rec.disk_bps = bps > 0 ? (uint64_t)bps : 0;
    json_int_t iops = json_integer_value(json_object_get(j, "disk_iops"));
    rec.disk_iops = iops > 0 && iops <= UINT32_MAX ? (uint32_t)iops : 0;
    enum vm_state s = vm_state_from_string(json_string_value(json_object_get(j, "state")));
    rec.state = s >= 0 ? s : VM_CREATING;
    json_t *net = json_object_get(j, "network");
    if (json_is_object(net)) {
        rec.network = json_dumps(net, JSON_COMPACT);
        if (!rec.network) {
            json_decref(j);
            return -ENOMEM;
        }
    }
    json_decref(j);
    *ret = rec;
    return 0;
}

void instance_record_release(struct instance_record *rec)
{
    free(rec->network);
    rec->network = NULL;
}

int instance_record_set_network(struct instance_record *rec, const char *json_text)
{
    char *copy = NULL;

    if (json_text && !(copy = strdup(json_text))) {
        return -ENOMEM;
    }
    free(rec->network);
    rec->network = copy;
    return 0;
}

bool instance_is_bound(const struct instance_record *rec)
{
    return rec->sandbox_id[0] != '\0';
}

int instance_bind(struct instance_record *rec, const char *sandbox_id)
{
    if (!sandbox_id_is_valid(sandbox_id)) {
        return -EINVAL;
    }
    if (instance_is_bound(rec)) {
        return strcmp(rec->sandbox_id, sandbox_id) == 0 ? 0 : -EBUSY;
    }
    memcpy(rec->sandbox_id, sandbox_id, SANDBOX_ID_LEN + 1);
    return 0;
}

enum instance_verdict instance_reattach_verdict(const struct instance_record *rec,
                                                const struct instance_probe *probe,
                                                const char **reason)
{
    const char *why = NULL;

    if (!probe->record_ok) {
        why = "no readable instance record";
    } else if (rec->state == VM_SUSPENDED) {
        /* No VMM to find: the durable snapshot is the sandbox now. */
        if (!instance_is_bound(rec)) {
            why = "it is bound to no sandbox";
        } else if (!probe->snapshot_exists) {
            why = "it was suspended but its snapshot is gone";
        } else if (!probe->netns_exists) {
            why = "its network namespace is gone";
        }
        if (reason) {
            *reason = why ? why : "it is suspended";
        }
        return why ? INSTANCE_DESTROY : INSTANCE_REATTACH;
    } else if (rec->state != VM_RUNNING && rec->state != VM_PAUSED) {
        /* Paused is settled too: its VMM holds the guest's memory, stopped, and stays so. */
        why = "it was neither running nor paused (unfinished create, destroy or pause)";
    } else if (!instance_is_bound(rec)) {
        why = "it is bound to no sandbox";
    } else if (rec->pid <= 1 || rec->pid_start_time == 0) {
        why = "the record names no VMM process";
    } else if (!probe->process_exists) {
        why = "its VMM is gone";
    } else if (probe->process_start_time != rec->pid_start_time) {
        why = "its pid now belongs to another process";
    } else if (!probe->netns_exists) {
        why = "its network namespace is gone";
    }
    if (reason) {
        *reason = why ? why : "its VMM is alive";
    }
    return why ? INSTANCE_DESTROY : INSTANCE_REATTACH;
}
