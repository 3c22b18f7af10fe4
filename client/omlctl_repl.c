/* omlctl_repl.c - replication commands: promote-replica. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "omlctl.h"
#include "pbjson.h"

int ctl_promote_replica(ctl *g, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            printf("usage: omlctl --server REPLICA promote-replica\n"
                   "Makes the read replica REPLICA the primary of the stream it follows, once\n"
                   "its primary is gone: it takes the primary lease in Redis (refused while\n"
                   "the old primary's lease lives: retry after replicate_lease_ms), applies\n"
                   "the rest of the stream and continues the same log. Other replicas follow\n"
                   "it; the old primary, restarted, finds the lease taken and does not start.\n");
            return 0;
        } else if (!ctl_common_opt(g, argc, argv, &i)) {
            return ctl_usage_error("promote-replica", "unknown argument '%s'", argv[i]);
        }
    }
    omlc *c;
    int rc = ctl_connect(g, &c);
    if (rc)
        return rc;
    omlc_error err;
    Omld__Response *resp = NULL;
    rc = omlc_promote_replica(c, &resp, &err);
    omlc_close(c);
    if (rc)
        return ctl_fail("promote-replica", rc, &err);
    const Omld__PromoteReplicaResponse *m = resp->promote_replica;
    if (g->json)
        ctl_print_json(omld_pbjson_write(&m->base));
    else
        printf("promote-replica: %s is the primary now, its log continuing after position %llu "
               "(model version %llu)\n", m->primary, (unsigned long long)m->log_position,
               (unsigned long long)m->model_version);
    omld__response__free_unpacked(resp, NULL);
    return CTL_EXIT_OK;
}
