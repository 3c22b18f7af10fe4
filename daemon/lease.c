/* lease.c - the primary lease's scripts and replies (lease.h).
 *
 * DESIGN. Each step is one Lua script, so Redis runs it atomically: no
 * other client's command comes between the GET that checks the holder and
 * the SET that takes it. The scripts return flat arrays of strings, parsed
 * in one place (omld_lease_parse). */
#include "lease.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "atomic_file.h"

/* KEYS: lease, owner, primary; ARGV: me, ttl_ms, mode. Answers
 * {status, holder, holder's address, ttl, previous owner}. */
static const char TAKE[] =
    "local me, ttl, mode = ARGV[1], ARGV[2], ARGV[3]\n"
    "local owner = redis.call('GET', KEYS[2])\n"
    "local addr = redis.call('GET', KEYS[3]) or ''\n"
    "if mode == 'primary' and owner and owner ~= me then\n"
    "  return {'superseded', owner, addr, '-1', ''}\n"
    "end\n"
    "local holder = redis.call('GET', KEYS[1])\n"
    "if holder and holder ~= me then\n"
    "  return {'held', holder, addr, tostring(redis.call('PTTL', KEYS[1])), ''}\n"
    "end\n"
    "if holder then redis.call('PEXPIRE', KEYS[1], ttl)\n"
    "else redis.call('SET', KEYS[1], me, 'NX', 'PX', ttl) end\n"
    "redis.call('SET', KEYS[2], me)\n"
    "return {'ok', me, addr, ttl, owner or ''}\n";

/* KEYS: lease, owner; ARGV: me, the owner to put back. */
static const char RELEASE[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2]) else redis.call('DEL', KEYS[2]) end\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

/* KEYS: lease; ARGV: me, then the command. */
static const char FENCE[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then\n"
    "  return redis.error_reply('NOTLEASE ' .. KEYS[1] .. ' is not held by this omld')\n"
    "end\n"
    "return redis.call(unpack(ARGV, 2))\n";

int omld_node_id(const char *dir, char *out, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/node_id", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        char buf[64] = "";
        int ok = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        buf[strcspn(buf, "\r\n")] = '\0';
        if (ok && strlen(buf) == OMLD_NODE_ID_LEN &&
            strspn(buf, "0123456789abcdef") == OMLD_NODE_ID_LEN) {
            memcpy(out, buf, OMLD_NODE_ID_LEN + 1);
            return 0;
        }
        snprintf(err, errlen, "%s does not hold a node id (16 hex digits): remove it to draw a "
                 "new one", path);
        return -1;
    }
    uint8_t raw[OMLD_NODE_ID_LEN / 2];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        snprintf(err, errlen, "cannot draw a node id: %s", strerror(errno));
        return -1;
    }
    char text[OMLD_NODE_ID_LEN + 2];
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(text + 2 * i, 3, "%02x", raw[i]);
    text[OMLD_NODE_ID_LEN] = '\n';
    struct iovec v = {text, OMLD_NODE_ID_LEN + 1};
    enum oml_atomic_stage stage;
    if (oml_atomic_write(path, &v, 1, 0644, &stage) != 0 && stage != OML_ATOMIC_DIR) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    memcpy(out, text, OMLD_NODE_ID_LEN);
    out[OMLD_NODE_ID_LEN] = '\0';
    return 0;
}

void omld_lease_keys_init(omld_lease_keys *k, const char *prefix)
{
    snprintf(k->lease, sizeof k->lease, "%s:lease", prefix);
    snprintf(k->owner, sizeof k->owner, "%s:owner", prefix);
    snprintf(k->primary, sizeof k->primary, "%s:primary", prefix);
}

int omld_lease_take_argv(const omld_lease_keys *k, const char *me, int mode, char ttl[24],
                         const char **argv)
{
    const char *a[] = {"EVAL", TAKE, "3", k->lease, k->owner, k->primary, me, ttl,
                       mode == OMLD_LEASE_PROMOTE ? "promote" : "primary"};
    memcpy(argv, a, sizeof a);
    return 9;
}

int omld_lease_release_argv(const omld_lease_keys *k, const char *me, const char *prev_owner,
                            const char **argv)
{
    const char *a[] = {"EVAL", RELEASE, "2", k->lease, k->owner, me, prev_owner};
    memcpy(argv, a, sizeof a);
    return 7;
}

int omld_lease_fence_argv(const omld_lease_keys *k, const char *me, int argc, const char **argv,
                          const size_t *len, const char **out, size_t *out_len)
{
    const char *head[] = {"EVAL", FENCE, "1", k->lease, me};
    for (int i = 0; i < 5; i++) {
        out[i] = head[i];
        if (out_len)
            out_len[i] = strlen(head[i]);
    }
    for (int i = 0; i < argc; i++) {
        out[5 + i] = argv[i];
        if (out_len)
            out_len[5 + i] = len ? len[i] : strlen(argv[i]);
    }
    return argc + 5;
}

static void copy_elem(const redisReply *r, size_t i, char *out, size_t cap)
{
    out[0] = '\0';
    if (i < r->elements && r->element[i]->type == REDIS_REPLY_STRING)
        snprintf(out, cap, "%s", r->element[i]->str);
}

void omld_lease_parse(const redisReply *reply, omld_lease_answer *out)
{
    memset(out, 0, sizeof *out);
    out->ttl_ms = -1;
    if (reply == NULL) {
        snprintf(out->error, sizeof out->error, "the Redis connection was lost");
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(out->error, sizeof out->error, "Redis refused the lease script: %s", reply->str);
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 5) {
        snprintf(out->error, sizeof out->error, "the lease script's answer is not an array of 5");
        return;
    }
    char status[16], ttl[24];
    copy_elem(reply, 0, status, sizeof status);
    copy_elem(reply, 1, out->holder, sizeof out->holder);
    copy_elem(reply, 2, out->holder_addr, sizeof out->holder_addr);
    copy_elem(reply, 3, ttl, sizeof ttl);
    copy_elem(reply, 4, out->prev_owner, sizeof out->prev_owner);
    out->ttl_ms = ttl[0] ? strtoll(ttl, NULL, 10) : -1;
    out->ok = strcmp(status, "ok") == 0;
    out->superseded = strcmp(status, "superseded") == 0;
    if (!out->ok && !out->superseded && strcmp(status, "held") != 0)
        snprintf(out->error, sizeof out->error, "the lease script answered '%s'", status);
}

void omld_lease_describe(const omld_lease_answer *a, const omld_lease_keys *k, char *out,
                         size_t cap)
{
    const char *addr = a->holder_addr[0] ? a->holder_addr : "an address not published";
    if (a->error[0])
        snprintf(out, cap, "the primary lease %s could not be taken: %s", k->lease, a->error);
    else if (a->superseded)
        snprintf(out, cap, "superseded: node %s owns this replication stream (%s names its "
                 "primary at %s: another omld is or was its primary, a replica promoted while this one was away, say), so this "
                 "omld is not its primary and will not write; its log may hold writes the new "
                 "primary never had. To follow the new primary, start this omld as a replica "
                 "(replica_of) on a fresh data_dir", a->holder, k->primary, addr);
    else
        snprintf(out, cap, "the primary lease %s is held by node %s (primary at %s) for %lld "
                 "ms more: that primary is alive, or it died less than its lease time ago",
                 k->lease, a->holder, addr, (long long)a->ttl_ms);
}
